package modelspec

import "testing"

func TestParseModel(t *testing.T) {
	tests := []struct {
		in       string
		provider string
		name     string
		wantErr  bool
	}{
		{"offline", ProviderOffline, "offline", false},
		{"claude-sonnet-4-5", ProviderAnthropic, "claude-sonnet-4-5", false},
		{"gemini-2.5-flash", ProviderGoogle, "gemini-2.5-flash", false},
		{"gpt-4o-mini", ProviderOpenAI, "gpt-4o-mini", false},
		{"o3-mini", ProviderOpenAI, "o3-mini", false},
		{"google:gemini-2.5-pro", ProviderGoogle, "gemini-2.5-pro", false},
		{"anthropic:claude-opus-4", ProviderAnthropic, "claude-opus-4", false},
		{"openai:my-finetune", ProviderOpenAI, "my-finetune", false},
		{"ollama:llama3.2", ProviderOllama, "llama3.2", false},
		{"llama3", "", "", true},
		{"openai:", "", "", true},
		{"", "", "", true},
	}
	for _, tt := range tests {
		m, err := ParseModel(tt.in)
		if (err != nil) != tt.wantErr || m.Provider != tt.provider || m.Name != tt.name {
			t.Errorf("ParseModel(%q) = %+v, %v; want %s %s err %v", tt.in, m, err, tt.provider, tt.name, tt.wantErr)
		}
	}
}
