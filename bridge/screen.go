package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
)

// ErrContentBlocked refuses a message the safety section's patterns or
// moderation service refuse. Nothing of it is stored or sent to a model.
var ErrContentBlocked = mesh.NewError("content_blocked", http.StatusUnprocessableEntity, "message refused by the content policy")

// ErrModerationUnavailable refuses a message the moderation service could
// not judge (safety.moderation.fail_open off): it may be sent again.
var ErrModerationUnavailable = mesh.NewError("moderation_unavailable", http.StatusServiceUnavailable, "content moderation unavailable")

// screen checks users' messages against the safety section.
type screen struct {
	patterns []*regexp.Regexp
	mod      *config.Moderation
	key      string
	client   *http.Client
	log      zerolog.Logger
}

// newScreen returns the check of s, or nil when s checks nothing.
func newScreen(s config.Safety, client *http.Client, log zerolog.Logger) (func(context.Context, string) error, error) {
	if len(s.BlockPatterns) == 0 && s.Moderation == nil {
		return nil, nil
	}
	sc := &screen{mod: s.Moderation, client: client, log: log}
	for _, p := range s.BlockPatterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("safety.block_patterns: %w", err)
		}
		sc.patterns = append(sc.patterns, re)
	}
	if m := sc.mod; m != nil {
		sc.key = string(m.Key)
		if sc.key == "" {
			return nil, fmt.Errorf("safety.moderation: %s is not set: the moderation service needs its key", m.KeyVariable())
		}
		if sc.client == nil {
			sc.client = &http.Client{}
		}
	}
	return sc.check, nil
}

// check refuses text that a pattern matches or the service flags. The
// log names the rule or the categories, never the text.
func (sc *screen) check(ctx context.Context, text string) error {
	for i, re := range sc.patterns {
		if re.MatchString(text) {
			sc.log.Info().Int("pattern", i).Msg("message refused by safety.block_patterns")
			return ErrContentBlocked.With(fmt.Sprintf("message refused by the content policy (block pattern %d)", i))
		}
	}
	if sc.mod == nil {
		return nil
	}
	flagged, err := sc.moderate(ctx, text)
	switch {
	case err != nil && sc.mod.FailOpen:
		sc.log.Warn().Err(err).Msg("content moderation failed: message let through (safety.moderation.fail_open)")
		return nil
	case err != nil:
		sc.log.Warn().Err(err).Msg("content moderation failed: message refused")
		return ErrModerationUnavailable.With("content moderation did not answer; send the message again later")
	case len(flagged) > 0:
		sc.log.Info().Strs("categories", flagged).Msg("message refused by content moderation")
		for i, c := range flagged {
			flagged[i] = mesh.Clip(c)
		}
		return ErrContentBlocked.With(fmt.Sprintf("message refused by the content policy (%s)", strings.Join(flagged, ", ")))
	}
	return nil
}

// moderate asks the service about text and returns the categories that
// flag it.
func (sc *screen) moderate(ctx context.Context, text string) ([]string, error) {
	m := sc.mod
	ctx, cancel := context.WithTimeout(ctx, m.Timeout.Std())
	defer cancel()
	var body any = map[string]string{"model": m.Model, "input": text}
	if m.API == config.ModerationAzure {
		body = map[string]any{"text": text, "outputType": "EightSeverityLevels"}
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.URL, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if m.API == config.ModerationAzure {
		req.Header.Set("Ocp-Apim-Subscription-Key", sc.key)
	} else {
		req.Header.Set("Authorization", "Bearer "+sc.key)
	}
	resp, err := sc.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("moderation service answered %d: %s", resp.StatusCode, mesh.Clip(string(raw)))
	}
	if m.API == config.ModerationAzure {
		return azureFlagged(raw, m.Severity)
	}
	return openAIFlagged(raw)
}

// openAIFlagged reads a /v1/moderations answer: the categories of the
// results that are flagged (or "flagged" when none is named).
func openAIFlagged(raw []byte) ([]string, error) {
	var out struct {
		Results []struct {
			Flagged    bool            `json:"flagged"`
			Categories map[string]bool `json:"categories"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Results == nil {
		return nil, fmt.Errorf("moderation answer is not {\"results\": [...]}: %s", mesh.Clip(string(raw)))
	}
	var flagged []string
	for _, r := range out.Results {
		if !r.Flagged {
			continue
		}
		n := len(flagged)
		for c, on := range r.Categories {
			if on {
				flagged = append(flagged, c)
			}
		}
		if len(flagged) == n {
			flagged = append(flagged, "flagged")
		}
	}
	return flagged, nil
}

// azureFlagged reads a Content Safety text:analyze answer: the categories
// at or above severity, and the blocklists matched.
func azureFlagged(raw []byte, severity int) ([]string, error) {
	var out struct {
		BlocklistsMatch []struct {
			BlocklistName string `json:"blocklistName"`
		} `json:"blocklistsMatch"`
		CategoriesAnalysis []struct {
			Category string `json:"category"`
			Severity int    `json:"severity"`
		} `json:"categoriesAnalysis"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.CategoriesAnalysis == nil {
		return nil, fmt.Errorf("moderation answer is not {\"categoriesAnalysis\": [...]}: %s", mesh.Clip(string(raw)))
	}
	var flagged []string
	for _, c := range out.CategoriesAnalysis {
		if c.Severity >= severity {
			flagged = append(flagged, c.Category)
		}
	}
	for _, b := range out.BlocklistsMatch {
		flagged = append(flagged, "blocklist "+b.BlocklistName)
	}
	return flagged, nil
}
