package agent

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/config"
	"github.com/agentmesh/agentmesh/mesh/llm"
)

// This file prepares the agent tree for runs. A step is one node of the
// configured tree (config.Node, agent.yaml's agents): an llm or a2a leaf,
// or a sequential, parallel or loop composite. An agent without an agent:
// tree is one llm step, its root. tree.go runs the tree.

// rootKey is the key of the tree's root; a child's key is its parent's key
// and its index: r.0, r.0.1 …
const rootKey = "r"

// step is a step of the configured tree, with what its runs need.
type step struct {
	key      string
	path     []int
	cfg      *config.Node
	parent   *step
	index    int // among its parent's children
	children []*step
	remotes  *remoteSet
	provider llm.Provider
	// output is the schema an llm step answers with, if it has one.
	output *stepOutput
}

// leaf says the step runs as a work item of its own (llm, a2a); a
// composite only schedules its children.
func (s *step) leaf() bool { return s.cfg.Type == config.NodeLLM || s.cfg.Type == config.NodeA2A }

// buildTree prepares the tree of cfg for runs.
func (a *Role) buildTree(root *config.Node, providers func(string) (llm.Provider, error)) error {
	a.steps = map[string]*step{}
	var build func(cfg *config.Node, parent *step, key string, path []int, index int) error
	build = func(cfg *config.Node, parent *step, key string, path []int, index int) error {
		s := &step{key: key, path: path, cfg: cfg, parent: parent, index: index, provider: a.cfg.Provider}
		if cfg.Model != "" && cfg.Model != a.cfg.Agent.LLM.Model {
			if providers == nil {
				return fmt.Errorf("agent: node %q uses model %s, but no provider factory was given", cfg.Name, cfg.Model)
			}
			p, err := providers(cfg.Model)
			if err != nil {
				return fmt.Errorf("agent: node %q: %w", cfg.Name, err)
			}
			s.provider = p
		}
		out, err := newStepOutput(cfg)
		if err != nil {
			return err
		}
		s.output = out
		if cfg.Type == config.NodeLLM && cfg.Timeout > 0 {
			s.provider = timedProvider{Provider: s.provider, timeout: cfg.Timeout.Std()}
		}
		switch cfg.Type {
		case config.NodeA2A:
			s.remotes = a.pool.set([]config.A2AAgent{{Name: cfg.Name, URL: cfg.URL, Description: cfg.Description, Destructive: cfg.Destructive || cfg.DestructiveHint}})
		case config.NodeLLM:
			list := cfg.A2A
			if parent == nil && a.cfg.A2A != nil {
				list = a.cfg.A2A
			}
			s.remotes = a.pool.set(list)
		}
		a.steps[key] = s
		if parent != nil {
			parent.children = append(parent.children, s)
		}
		for i := range cfg.Agents {
			if err := build(&cfg.Agents[i], s, key+"."+strconv.Itoa(i), append(append([]int(nil), path...), i), i); err != nil {
				return err
			}
		}
		return nil
	}
	if err := build(root, nil, rootKey, []int{}, 0); err != nil {
		return err
	}
	a.root = a.steps[rootKey]
	a.remotes = a.root.remotes
	if a.remotes == nil {
		a.remotes = a.pool.set(nil)
	}
	a.simple = a.root.leaf() && a.root.cfg.Type == config.NodeLLM
	return nil
}

// maxIterations of a loop step.
func maxIterations(n *config.Node) int {
	if n.MaxIterations > 0 {
		return n.MaxIterations
	}
	return config.DefaultMaxIterations
}

// timedProvider bounds each call of an llm step with the step's timeout.
// The provider sees the deadline as its caller's and fails the call with
// LLM_TIMEOUT, as it does at llm.timeout.
type timedProvider struct {
	llm.Provider
	timeout time.Duration
}

func (p timedProvider) Generate(ctx context.Context, req llm.Request) (*llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	return p.Provider.Generate(ctx, req)
}
