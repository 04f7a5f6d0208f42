package modelspec

// Key is a provider's API key. It prints, marshals and logs as
// "[redacted]"; only Reveal gives the value.
type Key string

const redacted = "[redacted]"

func (k Key) String() string { return redacted }

// GoString keeps %#v from printing the value.
func (k Key) GoString() string { return redacted }

// MarshalText keeps encoders from writing the value.
func (k Key) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Reveal returns the key, for the one place that sends it.
func (k Key) Reveal() string { return string(k) }

// Keys are the API keys of the providers that take one, as the
// environment variables of [KeyEnv] hold them.
type Keys struct {
	Google    Key
	Anthropic Key
	OpenAI    Key
	Cohere    Key
}

// For returns provider's key.
func (k Keys) For(provider string) Key {
	switch provider {
	case ProviderGoogle:
		return k.Google
	case ProviderAnthropic:
		return k.Anthropic
	case ProviderOpenAI:
		return k.OpenAI
	case ProviderCohere:
		return k.Cohere
	}
	return ""
}
