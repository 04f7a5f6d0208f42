package agent

import (
	"context"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file gives the model a user message's files: their bytes, read
// from the object store mesh_files once per run, or a text placeholder
// for a model configured as text only (files.text_only_models) or a file
// that cannot be read.

// model is the model the step calls.
func (t *turn) model() string {
	if m := t.step.cfg.Model; m != "" {
		return m
	}
	return t.a.cfg.Agent.LLM.Model
}

// files returns a user message's text and files as the model gets them.
func (t *turn) files(ctx context.Context, m mesh.Message) (string, []llm.File) {
	if len(m.Files) == 0 {
		return m.Content, nil
	}
	text := m.Content
	placeholder := func(f llm.File) {
		if text != "" {
			text += "\n"
		}
		text += f.Placeholder()
	}
	textOnly := t.a.cfg.Agent.Files.TextOnly(t.model())
	var out []llm.File
	for _, f := range m.Files {
		lf := llm.File{MediaType: f.MediaType, Name: f.Name, URL: f.URL}
		if textOnly {
			placeholder(lf)
			continue
		}
		if f.URL == "" {
			data, err := t.fileBytes(ctx, f)
			if err != nil {
				t.log.Warn().Err(err).Str("file", f.ID).Msg("file not sent to the model")
				placeholder(lf)
				continue
			}
			lf.Data = data
		}
		out = append(out, lf)
	}
	return text, out
}

// fileBytes reads a stored file, once per run.
func (t *turn) fileBytes(ctx context.Context, f mesh.File) ([]byte, error) {
	if data, ok := t.fileCache[f.ID]; ok {
		return data, nil
	}
	store := t.a.cfg.Resources.Files
	if store == nil {
		return nil, mesh.ErrFileNotFound
	}
	data, _, err := store.Get(ctx, t.conv.ID, f)
	if err != nil {
		return nil, err
	}
	if t.fileCache == nil {
		t.fileCache = map[string][]byte{}
	}
	t.fileCache[f.ID] = data
	return data, nil
}
