package llm

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

// Options configure a cloud provider.
type Options struct {
	// BaseURL overrides the provider's API URL: Gemini
	// https://generativelanguage.googleapis.com, Anthropic
	// https://api.anthropic.com, OpenAI https://api.openai.com/v1, Ollama
	// http://localhost:11434/v1. An OpenAI base names the version path
	// (…/v1), as OpenAI-compatible servers document it.
	BaseURL string
	// APIKey authenticates; it is sent to the provider and nowhere else.
	APIKey modelspec.Key
	// Timeout bounds one call (every attempt, every wait between attempts,
	// and the whole stream). Zero means 60s.
	Timeout time.Duration
	// MaxRetries bounds retries of a failed call. Zero means 3; -1 none. A
	// rate limit (429) is no failure: it is waited for and sent again
	// within MaxQueueWait, unless retries are off (-1).
	MaxRetries int
	// Sampling: max_tokens (zero means 4096), temperature and top_p (nil
	// means the API's default) of every call; a request's replace them.
	modelspec.Sampling
	// RetryBaseDelay is the backoff ceiling before the first retry; it
	// doubles each retry up to RetryMaxDelay, and the wait is random below
	// it (full jitter). A provider's Retry-After replaces the backoff. Zero
	// means 500ms.
	RetryBaseDelay time.Duration
	// RetryMaxDelay caps the backoff. Zero means 20s.
	RetryMaxDelay time.Duration
	// BreakerFailures is the number of consecutive failed attempts (5xx,
	// connection failures, timeouts, malformed or cut answers) that opens
	// the endpoint's circuit breaker. Zero means 5; -1 disables the breaker.
	BreakerFailures int
	// BreakerCooldown is how long an open breaker fails calls fast before it
	// lets one probe call through; a successful probe closes it. Zero means
	// 30s.
	BreakerCooldown time.Duration
	// MaxConcurrency bounds the calls in flight to the endpoint from this
	// process. Zero means none until the provider answers 429; from then on
	// the bound is learnt from its rate limits (limiter.go).
	MaxConcurrency int
	// RequestsPerMinute paces the calls' starts to the endpoint from this
	// process. Zero means no pacing.
	RequestsPerMinute int
	// MaxQueueWait bounds how long a call waits for the provider's
	// capacity (MaxConcurrency, RequestsPerMinute, the pauses its rate
	// limits ask for), over all its attempts, before it fails with
	// CodeRateLimit. Zero means 10 minutes.
	MaxQueueWait time.Duration
	// Reasoning asks the model to reason before it answers, and how much;
	// the zero value sends nothing (the model's default).
	Reasoning modelspec.Reasoning
	// NoPromptCache turns off the Anthropic provider's cache_control marks
	// on the system prompt and the tools (on by default: they are the same
	// from call to call, and a cached prefix costs a tenth to read).
	NoPromptCache bool
	// HTTPClient sends the requests. Nil means a client shared by the
	// process's endpoints on a clone of http.DefaultTransport (which
	// honours HTTPS_PROXY and NO_PROXY) keeping up to 256 idle connections
	// per host.
	HTTPClient *http.Client
	// Log receives retries. The zero value logs nothing.
	Log zerolog.Logger
}

// NewCloud returns the provider of a model served over HTTP: google
// (Gemini), anthropic, openai (and any OpenAI-compatible server through
// BaseURL), ollama, or cohere (its OpenAI-compatible API). Google,
// Anthropic and Cohere need an API key, and so does OpenAI at its default
// base URL; the error names the environment
// variable to set. The offline planner is no cloud provider: package
// mesh/llm/models builds every provider of a model name, offline included.
func NewCloud(model modelspec.Model, opts Options) (Provider, error) {
	if model.Provider == modelspec.ProviderOffline {
		return nil, fmt.Errorf("llm: model %s is the offline planner, not a cloud provider: build it with models.New", model)
	}
	if opts.BaseURL != "" {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("llm: model %s: base URL %q is not an http(s) URL", model, redactor{key: opts.APIKey.Reveal()}.scrub(opts.BaseURL))
		}
	}
	needKey := func() error {
		if opts.APIKey != "" {
			return nil
		}
		return fmt.Errorf("%w: model %s needs the environment variable %s; set it, or use llm.model: offline", ErrNoAPIKey, model, modelspec.KeyEnv(model.Provider))
	}
	switch model.Provider {
	case modelspec.ProviderGoogle:
		if err := needKey(); err != nil {
			return nil, err
		}
		return newGemini(model, opts), nil
	case modelspec.ProviderAnthropic:
		if err := needKey(); err != nil {
			return nil, err
		}
		return newAnthropic(model, opts), nil
	case modelspec.ProviderOpenAI:
		// A compatible server at its own URL usually needs no key.
		if opts.BaseURL == "" {
			if err := needKey(); err != nil {
				return nil, err
			}
		}
		return newOpenAI(model, opts, openAIDefaultBase), nil
	case modelspec.ProviderOllama:
		return newOpenAI(model, opts, ollamaDefaultBase), nil
	case modelspec.ProviderCohere:
		if err := needKey(); err != nil {
			return nil, err
		}
		return newOpenAI(model, opts, cohereDefaultBase), nil
	}
	return nil, fmt.Errorf("llm: unknown provider %q (model %s); use google, anthropic, openai, ollama, cohere or offline", model.Provider, model)
}
