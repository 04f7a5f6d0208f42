package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// serveHealth answers container probes for a role without HTTP of its own
// on addr (MESH_HEALTH_ADDR): /health is 503 only when the role's own check
// fails while NATS is reachable (a stuck process: restart it), /ready is 200
// only while the node is connected and its check passes. It stops with ctx.
func (n *node) serveHealth(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errConfig, "MESH_HEALTH_ADDR", err)
	}
	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, ok bool, body map[string]any) {
		w.Header().Set("Content-Type", "application/json")
		status := http.StatusOK
		if !ok {
			status = http.StatusServiceUnavailable
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		err := n.check(r.Context())
		stuck := err != nil && n.nc.IsConnected()
		answer(w, !stuck, map[string]any{"role": n.role, "node": n.id, "nats": n.nc.IsConnected(), "healthy": !stuck})
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		err := n.check(r.Context())
		body := map[string]any{"role": n.role, "node": n.id, "ready": err == nil}
		if err != nil {
			body["reason"] = err.Error()
		}
		answer(w, err == nil, body)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error().Err(err).Msg("health listener")
		}
	}()
	n.log.Info().Str("addr", l.Addr().String()).Msg("health probes on /health and /ready")
	return nil
}

// runHealthcheck is a container health check for images without curl:
// `mesh healthcheck http://127.0.0.1:8080/ready` exits 0 when the URL
// answers 200, 1 otherwise.
func runHealthcheck(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: usage: mesh healthcheck <url>", errConfig)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errConfig, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", args[0], resp.Status)
	}
	return nil
}
