package config

import "github.com/agentmesh/agentmesh/mesh/llm/modelspec"

// Definition is what agent.yaml says the agents are: the top-level agent
// (its name, description, prompt, model, tools, sub-agents and tree) and
// the group chats, whose members may define more agents
// ([Definition.Agents]). It is the part of [Config] that the roles which
// run or check agents read; how a process runs is its [Process].
type Definition struct {
	// Name names the agent; its turns go to mesh.work.agent.<Name>.<conversation>.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Enabled false keeps the agent from running: no process serves it
	// and the directory does not list it. Absent means true.
	Enabled *bool `yaml:"enabled"`
	// Capabilities are what the agent says it can do, as free-form
	// strings shown in the directory (GET /agents) and the A2A cards.
	Capabilities []string `yaml:"capabilities"`
	// Prompt is the system prompt, the first message of every conversation.
	Prompt string `yaml:"prompt"`
	LLM    LLM    `yaml:"llm"`
	// MCP is the single MCP server of the original format; it is served as
	// the server named "default" unless mcp_servers also names one so.
	MCP        *MCPServer  `yaml:"mcp"`
	MCPServers []MCPServer `yaml:"mcp_servers"`
	A2A        []A2AAgent  `yaml:"a2a"`
	// StateTool offers the built-in set_state tool to the agent built from
	// the top-level fields (an agent: tree sets it per llm node).
	StateTool bool `yaml:"state_tool"`
	// Agent is the agent tree; when absent one llm node is built from the
	// top-level fields.
	Agent  *Node   `yaml:"agent"`
	Groups []Group `yaml:"groups"`
}

// LLM selects the model.
type LLM struct {
	// Model is "offline", a model name (gemini-…, claude-…, gpt-…) or
	// provider:model. Empty means DefaultModel (gemini-2.5-flash).
	Model string `yaml:"model"`
	// BaseURL overrides the provider's API URL (gateways, proxies, Ollama).
	BaseURL string `yaml:"base_url"`
	// Timeout bounds one model call. Zero means 60s.
	Timeout Duration `yaml:"timeout"`
	// MaxRetries bounds retries of a failed call. Zero means 3; -1 disables.
	MaxRetries int `yaml:"max_retries"`
	// MaxConcurrency bounds the calls one process has in flight to the
	// model's endpoint. Zero means none until the provider answers 429;
	// the bound is then learnt from its rate limits.
	MaxConcurrency int `yaml:"max_concurrency"`
	// RequestsPerMinute paces the calls one process starts to the
	// endpoint. Zero means no pacing.
	RequestsPerMinute int `yaml:"requests_per_minute"`
	// MaxQueueWait bounds how long a call waits for the provider's
	// capacity (the bounds above, the pauses its rate limits ask for)
	// before the turn fails with RATE_LIMIT. Zero means 10m.
	MaxQueueWait Duration `yaml:"max_queue_wait"`
	// Sampling: max_tokens, temperature and top_p of every call (a tree
	// node's own settings replace them for its calls).
	modelspec.Sampling `yaml:",inline"`
	// Reasoning asks the model to reason before it answers (effort low,
	// medium or high; budget_tokens). Absent means the model's default.
	Reasoning modelspec.Reasoning `yaml:"reasoning"`
	// PromptCache marks the system prompt and the tools for Anthropic's
	// prompt cache. Absent means true.
	PromptCache *bool `yaml:"prompt_cache"`
}

// PromptCacheOn says whether the prompt cache is asked for (prompt_cache
// absent or true).
func (l LLM) PromptCacheOn() bool { return l.PromptCache == nil || *l.PromptCache }

// MCPServer is a tool server: a command run over stdio, or a URL spoken to
// over streamable HTTP.
type MCPServer struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	// Headers are sent with every HTTP request to URL.
	Headers map[string]string `yaml:"headers"`
	// Timeout bounds one tool call. Zero means 30s.
	Timeout Duration `yaml:"timeout"`
	// DedupeCallIDs says the server deduplicates tools/call requests by the
	// "agentmesh/call_id" key of their _meta (the sample server does), so a
	// call interrupted by a crash may safely be sent again with the same id.
	DedupeCallIDs bool `yaml:"dedupe_call_ids"`
}

// A2AAgent is a remote agent reached over A2A, offered to the model as a tool.
type A2AAgent struct {
	Name        string `yaml:"name"`
	URL         string `yaml:"url"`
	Description string `yaml:"description"`
	// Destructive makes a call to the agent need approval, as a destructive
	// tool's does.
	Destructive bool `yaml:"destructive"`
	// DestructiveHint is the original spelling of Destructive.
	DestructiveHint bool `yaml:"destructiveHint"`
}

// IsDestructive reports whether calls need approval.
func (a A2AAgent) IsDestructive() bool { return a.Destructive || a.DestructiveHint }

// SubAgents lists the A2A agents the configuration delegates to: the
// top-level a2a list, the a2a lists of the agent tree's llm nodes and its
// a2a nodes, each name once.
func (c *Definition) SubAgents() []A2AAgent {
	var out []A2AAgent
	seen := map[string]bool{}
	add := func(a A2AAgent) {
		if a.Name == "" || seen[a.Name] {
			return
		}
		seen[a.Name] = true
		out = append(out, a)
	}
	for _, a := range c.A2A {
		add(a)
	}
	var walk func(n *Node)
	walk = func(n *Node) {
		if n == nil {
			return
		}
		for _, a := range n.A2A {
			add(a)
		}
		if n.Type == NodeA2A {
			add(A2AAgent{Name: n.Name, URL: n.URL, Description: n.Description, Destructive: n.Destructive || n.DestructiveHint})
		}
		for i := range n.Agents {
			walk(&n.Agents[i])
		}
	}
	walk(c.Agent)
	return out
}

// Node types of the agent tree.
const (
	NodeLLM        = "llm"
	NodeSequential = "sequential"
	NodeParallel   = "parallel"
	NodeLoop       = "loop"
	NodeA2A        = "a2a"
)

// Node is a node of the agent tree: an llm step, or a sequential, parallel,
// loop or a2a node.
type Node struct {
	Name        string `yaml:"name"`
	Type        string `yaml:"type"`
	Description string `yaml:"description"`
	// Model overrides the agent's llm.model for an llm node.
	Model string `yaml:"model"`
	// Timeout bounds each model call of an llm node (its retries and the
	// waits between them included), when shorter than llm.timeout: a quick
	// routing step gets 5s, a search 15s. Zero means llm.timeout alone.
	Timeout Duration `yaml:"timeout"`
	Prompt  string   `yaml:"prompt"`
	// Sampling: an llm node's max_tokens, temperature and top_p, over the
	// agent's llm section.
	modelspec.Sampling `yaml:",inline"`
	// OutputKey stores the node's reply in session state.
	OutputKey string `yaml:"output_key"`
	// OutputSchema makes an llm node answer with one JSON object matching
	// this JSON Schema: the model is asked for it, the answer validated,
	// and output_key holds the object.
	OutputSchema map[string]any `yaml:"output_schema"`
	CanExitLoop  bool           `yaml:"can_exit_loop"`
	// MaxIterations bounds a loop. Zero means 10.
	MaxIterations int `yaml:"max_iterations"`
	// AllowDestructive runs destructive tools without asking for approval.
	AllowDestructive bool `yaml:"allow_destructive"`
	// StateTool offers an llm node the built-in set_state tool, which
	// changes the conversation's state (docs/conversation-state.md).
	StateTool bool `yaml:"state_tool"`
	// Tools limits the tools an llm node is offered to these names: absent
	// means every tool, an empty list none (a node that only writes).
	Tools *[]string `yaml:"tools"`
	// Ref makes this child the node of that name defined elsewhere in the
	// tree (its whole subtree), instead of defining one here.
	Ref string `yaml:"ref"`
	// Agents are the children of sequential, parallel and loop nodes.
	Agents []Node `yaml:"agents"`
	// URL, Destructive: an a2a node's remote agent.
	URL             string `yaml:"url"`
	Destructive     bool   `yaml:"destructive"`
	DestructiveHint bool   `yaml:"destructiveHint"`
	// A2A are remote agents offered to an llm node as tools.
	A2A []A2AAgent `yaml:"a2a"`
}

// IsEnabled reports whether the agent runs (enabled is absent or true).
func (c *Definition) IsEnabled() bool { return c.Enabled == nil || *c.Enabled }

// DefaultPrompt is the system prompt of an agent whose file sets none.
const DefaultPrompt = "You are a helpful agent. Use the tools you have to do what the user asks."

// Tree returns the agent tree: the agent: section, or one llm node built from
// the top-level fields when there is none, so that an agent without a tree
// runs as a tree of one node.
func (c *Definition) Tree() *Node {
	if c.Agent != nil {
		return c.Agent
	}
	return &Node{Name: c.Name, Type: NodeLLM, Description: c.Description, Prompt: c.Prompt, Model: c.LLM.Model, A2A: c.A2A, StateTool: c.StateTool}
}

// Agents are the agents this definition defines: the top-level one (d
// itself), then every group participant defined with a prompt or a model,
// each as a definition of its own (a single llm node with the top-level
// tools and settings, and the participant's prompt, model and sampling).
func (d *Definition) Agents() []*Definition {
	out := []*Definition{d}
	seen := map[string]bool{d.Name: true}
	for _, g := range d.Groups {
		for _, p := range g.Participants {
			if !p.Defined() || seen[p.Agent] {
				continue
			}
			seen[p.Agent] = true
			a := *d
			a.Name, a.Description, a.Agent, a.A2A, a.Groups = p.Agent, p.Description, nil, nil, nil
			a.Enabled, a.Capabilities = nil, p.Capabilities
			if p.Prompt != "" {
				a.Prompt = p.Prompt
			}
			if p.Model != "" {
				a.LLM.Model = p.Model
			}
			a.LLM.Sampling = a.LLM.Sampling.Over(p.Sampling)
			out = append(out, &a)
		}
	}
	return out
}

// AgentNamed is the agent of Agents named name, or nil.
func (d *Definition) AgentNamed(name string) *Definition {
	for _, a := range d.Agents() {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Agents are the agents this configuration defines ([Definition.Agents]),
// each as a configuration of its own: its definition, with this
// configuration's Process. The first is c itself.
func (c *Config) Agents() []*Config {
	defs := c.Definition.Agents()
	out := []*Config{c}
	for _, d := range defs[1:] {
		a := *c
		a.Definition = *d
		out = append(out, &a)
	}
	return out
}

// AgentNamed is the agent of Agents named name, or nil.
func (c *Config) AgentNamed(name string) *Config {
	for _, a := range c.Agents() {
		if a.Name == name {
			return a
		}
	}
	return nil
}
