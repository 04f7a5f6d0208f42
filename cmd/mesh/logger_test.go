package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/config"
)

// A file output gets every line at the level and above, as JSON, even
// when the format is console; the debug lines of level info are dropped.
func TestLoggerLevelAndFileOutput(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mesh.log")
	for _, level := range []string{"info", "debug"} {
		cfg := &config.Config{}
		cfg.Log = config.Log{Level: level, Format: "console", Outputs: []string{path}}
		log, err := newLogger(cfg)
		if err != nil {
			t.Fatal(err)
		}
		log.Debug().Str("level_set", level).Msg("a debug line")
		log.Info().Str("level_set", level).Msg("an info line")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("line %q of the file is not JSON: %v", line, err)
		}
		got = append(got, rec["level_set"].(string)+":"+rec["level"].(string))
	}
	want := []string{"info:info", "debug:debug", "debug:info"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("lines (level set:line level) = %v, want %v", got, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file mode %v (%v), want 0600", fi.Mode(), err)
	}
}

func TestLoggerFileThatCannotBeOpened(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	cfg.Log.Outputs = []string{"stderr", filepath.Join(t.TempDir(), "no-such-dir", "mesh.log")}
	if _, err := newLogger(cfg); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "log.outputs") {
		t.Errorf("err = %v, want a configuration error naming log.outputs", err)
	}
}
