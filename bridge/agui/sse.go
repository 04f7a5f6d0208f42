package agui

import (
	"encoding/json"

	"github.com/agentmesh/agentmesh/bridge/sse"
)

// writeJSON writes each value as one event without an id.
func writeJSON[T any](s *sse.Writer, evs []T) error {
	for _, e := range evs {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if err := s.Event(0, data); err != nil {
			return err
		}
	}
	return nil
}
