package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/identity"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// runStatus prints the nodes of the mesh: role, node id, state, last
// heartbeat, pid and host, and the degradation mode when it is on; with
// --json, the nodes' heartbeat records as a JSON array, for scripts.
func runStatus(ctx context.Context, cfg *config.Config, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the nodes' heartbeat records as a JSON array")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return usageErr("mesh status takes no arguments, only --json")
	}
	if _, err := applyContext(cfg); err != nil {
		return err
	}
	ns, err := mesh.NewNamespace(cfg.Mesh.Prefix)
	if err != nil {
		return err
	}
	log, err := newLogger(cfg)
	if err != nil {
		return err
	}
	nc, _, err := connectAs(cfg, ns, identity.RoleAdmin, "mesh-status", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, ns.Bucket(mesh.BucketNodes))
	if err != nil {
		return fmt.Errorf("no mesh at %s (%w)", natsURL(cfg), err)
	}
	nodes := store.NewNodes(kv)
	list, err := nodes.List(ctx)
	if err != nil {
		return err
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Role != list[j].Role {
			return list[i].Role < list[j].Role
		}
		return list[i].Node < list[j].Node
	})
	if *asJSON {
		if list == nil {
			list = []mesh.NodeInfo{}
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	t := newTable("ROLE", "NODE", "STATE", "LAST HEARTBEAT", "PID", "HOST", "VERSION", "SERVES", "METRICS", "DETAIL")
	now := time.Now()
	for _, n := range list {
		last := "-"
		if !n.BeatAt.IsZero() {
			last = now.Sub(n.BeatAt).Round(100*time.Millisecond).String() + " ago"
		}
		detail := n.Detail
		for name, state := range n.Breakers {
			if state != "closed" {
				detail += fmt.Sprintf(" breaker %s %s", name, state)
			}
		}
		serves := strings.Join(n.Serves, ",")
		if serves == "" {
			serves = "-"
		}
		metrics := n.Metrics
		if metrics == "" {
			metrics = "-"
		}
		t.add(n.Role, n.Node, n.State, last, strconv.Itoa(n.PID), n.Host, buildOf(n), serves, metrics, strings.TrimSpace(detail))
	}
	if err := t.print(os.Stdout, stdoutWidth()); err != nil {
		return err
	}
	if d, err := nodes.Degraded(ctx); err == nil && d != nil {
		fmt.Printf("\nDEGRADED since %s: %s\n", d.Since.Format(time.RFC3339), d.Reason)
	}
	if len(list) == 0 {
		fmt.Println("no nodes: is the mesh running?")
	}
	return nil
}

// buildOf is the build a node runs, as semantic versioning writes a build:
// 0.1.0+7caed47 (a node of a release before 0.1.0 says none).
func buildOf(n mesh.NodeInfo) string {
	switch {
	case n.Version == "":
		return "-"
	case n.Commit == "" || n.Commit == "unknown":
		return n.Version
	}
	return n.Version + "+" + n.Commit
}
