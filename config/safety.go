package config

import (
	"fmt"
	"regexp"
	"time"
)

// Safety screens what users send before it is queued for a model: local
// patterns, and optionally a content moderation service. A message it
// refuses is answered 422 content_blocked and never stored.
type Safety struct {
	// BlockPatterns are regular expressions (Go RE2 syntax); a message
	// that matches one is refused. Use (?i) for case-insensitive rules.
	BlockPatterns []string `yaml:"block_patterns"`
	// Moderation, when set, asks a moderation service about each message.
	Moderation *Moderation `yaml:"moderation"`
}

// The moderation APIs the bridge speaks.
const (
	// ModerationOpenAI is POST <url> with {"model","input"} answered with
	// {"results":[{"flagged",…}]}: OpenAI's /v1/moderations and the
	// services that copy it.
	ModerationOpenAI = "openai"
	// ModerationAzure is Azure AI Content Safety's text:analyze, answered
	// with a severity per category.
	ModerationAzure = "azure"
)

// Moderation configures a content moderation service.
type Moderation struct {
	// API is openai or azure.
	API string `yaml:"api"`
	// URL is the endpoint: https://api.openai.com/v1/moderations, or
	// https://<resource>.cognitiveservices.azure.com/contentsafety/text:analyze?api-version=2024-09-01.
	URL string `yaml:"url"`
	// KeyEnv names the environment variable holding the service's key
	// (sent as a bearer token to openai, as Ocp-Apim-Subscription-Key to
	// azure). Empty means OPENAI_API_KEY or AZURE_CONTENT_SAFETY_KEY.
	KeyEnv string `yaml:"key_env"`
	// Model is the openai moderation model. Empty means
	// omni-moderation-latest.
	Model string `yaml:"model"`
	// Severity is the azure severity (0–7) from which a category blocks a
	// message. Zero means 4 (medium).
	Severity int `yaml:"severity"`
	// Timeout bounds one check. Zero means 5s.
	Timeout Duration `yaml:"timeout"`
	// FailOpen lets a message through when the service cannot answer.
	// Off by default: such a message is refused with 503 and may be sent
	// again.
	FailOpen bool `yaml:"fail_open"`
	// Key is the value of KeyVariable, read when the file is loaded; the
	// bridge refuses to start without it.
	Key Secret `yaml:"-"`
}

// Defaults of [Moderation].
const (
	DefaultModerationModel    = "omni-moderation-latest"
	DefaultModerationSeverity = 4
	DefaultModerationTimeout  = 5 * time.Second
)

// KeyVariable is the environment variable holding the service's key.
func (m *Moderation) KeyVariable() string {
	switch {
	case m.KeyEnv != "":
		return m.KeyEnv
	case m.API == ModerationAzure:
		return "AZURE_CONTENT_SAFETY_KEY"
	}
	return "OPENAI_API_KEY"
}

func (s *Safety) applyDefaults() {
	m := s.Moderation
	if m == nil {
		return
	}
	if m.Model == "" && m.API == ModerationOpenAI {
		m.Model = DefaultModerationModel
	}
	if m.Severity == 0 {
		m.Severity = DefaultModerationSeverity
	}
	if m.Timeout == 0 {
		m.Timeout = Duration(DefaultModerationTimeout)
	}
}

func (s *Safety) validate() *fieldErr {
	for i, p := range s.BlockPatterns {
		if _, err := regexp.Compile(p); err != nil {
			return &fieldErr{fmt.Sprintf("safety.block_patterns[%d]", i), fmt.Sprintf("%q is not a regular expression: %v", p, err)}
		}
	}
	m := s.Moderation
	if m == nil {
		return nil
	}
	if m.API != ModerationOpenAI && m.API != ModerationAzure {
		return &fieldErr{"safety.moderation.api", fmt.Sprintf("%q is not openai or azure", m.API)}
	}
	if err := checkURL(m.URL); err != nil {
		return &fieldErr{"safety.moderation.url", err.Error()}
	}
	if m.Severity < 0 || m.Severity > 7 {
		return &fieldErr{"safety.moderation.severity", "must be 0 to 7"}
	}
	if m.Timeout < 0 {
		return &fieldErr{"safety.moderation.timeout", "must not be negative"}
	}
	return nil
}
