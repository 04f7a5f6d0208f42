package config

import (
	"strings"
	"testing"
	"time"
)

func TestFilesSettings(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    Files
		wantErr string
	}{
		{name: "defaults", yaml: minimal, want: Files{MaxBytes: 768 << 10, MaxPerMessage: 4, MediaTypes: FileMediaTypes()}},
		{name: "defaults, a larger body", yaml: minimal + "http:\n  max_body_bytes: 8388608\n", want: Files{MaxBytes: 5 << 20, MaxPerMessage: 4, MediaTypes: FileMediaTypes()}},
		{name: "larger than a body carries", yaml: minimal + "files:\n  max_bytes: 1048576\n", wantErr: "files.max_bytes"},
		{name: "set", yaml: minimal + "files:\n  max_bytes: 1000\n  max_per_message: 2\n  media_types: [image/png]\n  text_only_models: [gpt-3.5-turbo]\n",
			want: Files{MaxBytes: 1000, MaxPerMessage: 2, MediaTypes: []string{"image/png"}, TextOnlyModels: []string{"gpt-3.5-turbo"}}},
		{name: "too large", yaml: minimal + "files:\n  max_bytes: 67108865\n", wantErr: "files.max_bytes"},
		{name: "negative", yaml: minimal + "files:\n  max_bytes: -1\n", wantErr: "files.max_bytes"},
		{name: "too many", yaml: minimal + "files:\n  max_per_message: 17\n", wantErr: "files.max_per_message"},
		{name: "unknown type", yaml: minimal + "files:\n  media_types: [image/svg+xml]\n", wantErr: "files.media_types"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parseCase(t, tt.yaml, tt.wantErr)
			if c == nil {
				return
			}
			f := c.Files
			if f.MaxBytes != tt.want.MaxBytes {
				t.Errorf("max bytes = %d, want %d", f.MaxBytes, tt.want.MaxBytes)
			}
			if f.MaxPerMessage != tt.want.MaxPerMessage {
				t.Errorf("max per message = %d, want %d", f.MaxPerMessage, tt.want.MaxPerMessage)
			}
			if got, want := strings.Join(f.MediaTypes, ","), strings.Join(tt.want.MediaTypes, ","); got != want {
				t.Errorf("media types = %q, want %q", got, want)
			}
			if got, want := strings.Join(f.TextOnlyModels, ","), strings.Join(tt.want.TextOnlyModels, ","); got != want {
				t.Errorf("text-only models = %q, want %q", got, want)
			}
		})
	}
	f := Files{MediaTypes: []string{"image/png", "application/pdf"}, TextOnlyModels: []string{"m1"}}
	for mt, want := range map[string]bool{"image/png": true, "IMAGE/PNG; q=1": true, "application/pdf": true, "image/jpeg": false, "": false} {
		if f.Accepts(mt) != want {
			t.Errorf("Accepts(%q) = %v, want %v", mt, !want, want)
		}
	}
	if !f.TextOnly("m1") || f.TextOnly("offline") || f.TextOnly("gpt-4o") {
		t.Error("TextOnly: m1 only")
	}
	c, err := Parse("agent.yaml", []byte(minimal+"files:\n  max_age: never\n"), env())
	if err != nil || c.Files.KeepFor(time.Hour) != 0 {
		t.Errorf("max_age never: %v, %v", err, c)
	}
	week := 7 * 24 * time.Hour
	for _, c := range []struct {
		age  Duration
		want time.Duration
	}{{0, week}, {Duration(time.Hour), time.Hour}, {Never, 0}} {
		if got := (&Files{MaxAge: c.age}).KeepFor(week); got != c.want {
			t.Errorf("KeepFor with max_age %v: %v, want %v", c.age, got, c.want)
		}
	}
}
