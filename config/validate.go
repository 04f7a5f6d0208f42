package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/agentmesh/agentmesh/mesh/llm/modelspec"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

const nameWant = "a name of letters, digits, '_' and '-'"

func (c *Config) validate() error {
	for _, check := range []func() *fieldErr{c.checkModels, c.checkRuntime, c.checkNATS, c.checkTools, c.checkTree, c.checkGroups, c.checkApprovals, c.checkAuth, c.Limits.validate, c.checkFiles, c.Safety.validate, c.checkBudgets} {
		if err := check(); err != nil {
			return &Error{File: c.Path, Field: err.field, Want: err.want}
		}
	}
	return nil
}

// checkModels checks the name, the models and the circuit breakers.
func (c *Config) checkModels() *fieldErr {
	if c.Name == "" {
		return &fieldErr{"name", "is required: " + nameWant + ", e.g. resource-manager"}
	}
	if !nameRE.MatchString(c.Name) {
		return &fieldErr{"name", fmt.Sprintf("%q is not %s", c.Name, nameWant)}
	}
	if err := checkCapabilities("capabilities", c.Capabilities); err != nil {
		return err
	}
	for field, m := range c.Models() {
		if _, err := modelspec.ParseModel(m); err != nil {
			return &fieldErr{field, err.Error()}
		}
	}
	if err := c.LLM.Reasoning.Check(); err != nil {
		return &fieldErr{"llm.reasoning", err.Error()}
	}
	if c.LLM.BaseURL != "" {
		if err := checkURL(c.LLM.BaseURL); err != nil {
			return &fieldErr{"llm.base_url", err.Error()}
		}
	}
	if c.LLM.MaxRetries < -1 {
		return &fieldErr{"llm.max_retries", "must be -1 (no retries), 0 (default) or more"}
	}
	if c.LLM.MaxConcurrency < 0 {
		return &fieldErr{"llm.max_concurrency", "must be 0 (no bound until the provider pushes back) or more"}
	}
	if c.LLM.RequestsPerMinute < 0 {
		return &fieldErr{"llm.requests_per_minute", "must be 0 (no pacing) or more"}
	}
	if c.LLM.MaxQueueWait < 0 {
		return &fieldErr{"llm.max_queue_wait", "must be 0 (10m) or more"}
	}
	for _, b := range []struct {
		field   string
		b       Breaker
		minimum int
	}{{"breakers.llm", c.Breakers.LLM, -1}, {"breakers.tools", c.Breakers.Tools, 0}, {"breakers.a2a", c.Breakers.A2A, 0}} {
		if b.b.Failures < b.minimum {
			what := "must be 0 (default) or more"
			if b.minimum < 0 {
				what = "must be -1 (no breaker), 0 (default) or more"
			}
			return &fieldErr{b.field + ".failures", what}
		}
		if b.b.Cooldown < 0 {
			return &fieldErr{b.field + ".cooldown", "must not be negative"}
		}
	}
	return c.checkSamplings()
}

// checkRuntime checks logging, the addresses, the mesh and http sections,
// replicas, recovery strategies and the node id.
func (c *Config) checkRuntime() *fieldErr {
	if k := c.Sessions.ExpiredKept; k != 0 && k.Std() < time.Second {
		// The bucket's limit markers live at least a second (NATS).
		return &fieldErr{"sessions.expired_kept", "must be at least 1s"}
	}
	if t := c.Sessions.TTL; t > 0 && t.Std() < time.Second {
		return &fieldErr{"sessions.ttl", `must be at least 1s, or "never"`}
	}
	if k, ttl := c.Sessions.ExpiredKept.Std(), c.Sessions.ExpireAfter(); k > 0 && ttl > 0 && k > ttl {
		// NATS ages the limit marker out with the bucket's max age: it would
		// say "expired" for the TTL only, then "not found".
		return &fieldErr{"sessions.expired_kept", fmt.Sprintf("must not exceed sessions.ttl (%s): the marker of an expired conversation ages out with it", ttl)}
	}
	if len(c.Sessions.SaveRetry) > 10 {
		return &fieldErr{"sessions.save_retry (" + EnvSessionsSaveRetry + ")", fmt.Sprintf("%d pauses: at most 10", len(c.Sessions.SaveRetry))}
	}
	for _, d := range c.Sessions.SaveRetry {
		if d.Std() < 10*time.Millisecond || d.Std() > 10*time.Minute {
			return &fieldErr{"sessions.save_retry (" + EnvSessionsSaveRetry + ")", fmt.Sprintf("%s: each pause from 10ms to 10m", d.Std())}
		}
	}
	if a := c.Mesh.EventsMaxAge.Std(); a != 0 && (a < MinEventsMaxAge || a > MaxEventsMaxAge) {
		return &fieldErr{"mesh.events_max_age (" + EnvEventsMaxAge + ")", fmt.Sprintf("%s: from 1h to 720h (30 days); 0 means 7 days", a)}
	}
	switch c.Log.Level {
	case "", "trace", "debug", "info", "warn", "error":
	default:
		return &fieldErr{"log.level (" + EnvLogLevel + ")", fmt.Sprintf("%q is not one of debug, info, warn, error", c.Log.Level)}
	}
	seenOutputs := map[string]bool{}
	for i, o := range c.Log.Outputs {
		field := fmt.Sprintf("log.outputs[%d]", i)
		switch {
		case strings.TrimSpace(o) == "":
			return &fieldErr{field, "must be stderr, stdout or a file path"}
		case seenOutputs[o]:
			return &fieldErr{field, fmt.Sprintf("%q is listed twice", o)}
		case strings.HasSuffix(o, "/"):
			return &fieldErr{field, fmt.Sprintf("%q is a directory: name a file", o)}
		}
		seenOutputs[o] = true
	}
	switch c.Log.Format {
	case "", "json", "console":
	default:
		return &fieldErr{"log.format (" + EnvLogFmt + ")", fmt.Sprintf("%q is not json or console", c.Log.Format)}
	}
	if c.Port < 0 || c.Port > 65535 {
		return &fieldErr{"port", fmt.Sprintf("%d is not a port number (1-65535)", c.Port)}
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		return &fieldErr{"host/port (" + EnvHTTPAddr + ")", fmt.Sprintf("%q is not host:port", c.HTTPAddr)}
	}
	if c.EmbeddedNATS() {
		if _, p, err := net.SplitHostPort(c.NATS.Listen); err != nil || !validPort(p) {
			return &fieldErr{"nats.listen (" + EnvNATSAddr + ")", fmt.Sprintf("%q is not host:port", c.NATS.Listen)}
		}
	}
	if c.NATS.Auth != NATSAuthNKeys && c.NATS.Auth != NATSAuthNone {
		return &fieldErr{"nats.auth (" + EnvNATSAuth + ")", fmt.Sprintf("%q is not nkeys or none", c.NATS.Auth)}
	}
	if (c.NATS.TLS.Cert == "") != (c.NATS.TLS.Key == "") {
		return &fieldErr{"nats.tls", "cert and key go together"}
	}
	if c.EmbeddedNATS() && !c.NATS.TLS.Empty() && c.NATS.TLS.Cert == "" {
		return &fieldErr{"nats.tls", "the embedded server needs cert and key (its certificate)"}
	}
	if c.Mesh.Prefix != "" && !nameRE.MatchString(c.Mesh.Prefix) {
		return &fieldErr{"mesh.prefix", fmt.Sprintf("%q is not %s", c.Mesh.Prefix, nameWant)}
	}
	if c.Mesh.MaxToolIterations < 0 || c.Mesh.Workers < 0 || c.Mesh.MaxDeliver < 0 {
		return &fieldErr{"mesh", "max_tool_iterations, workers and max_deliver must not be negative"}
	}
	if c.HTTP.MaxBodyBytes < 0 {
		return &fieldErr{"http.max_body_bytes", "must not be negative"}
	}
	if c.Sessions.MaxBytes < c.HTTP.MaxBodyBytes || c.Sessions.MaxBytes > 64<<20 {
		return &fieldErr{"sessions.max_bytes", fmt.Sprintf("%d: use http.max_body_bytes (%d) to 64 MiB, so that one message always fits", c.Sessions.MaxBytes, c.HTTP.MaxBodyBytes)}
	}
	if u, err := url.Parse(c.HTTP.PublicURL); c.HTTP.PublicURL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "") {
		return &fieldErr{"http.public_url", fmt.Sprintf("%q is not an http(s) URL without query, such as https://agents.example.com", c.HTTP.PublicURL)}
	}
	if err := c.HTTP.validate(); err != nil {
		return err
	}
	for role, n := range c.Mesh.Replicas {
		switch role {
		case "agent", "toolhost", "approver", "bridge", "group", "monitor":
		default:
			return &fieldErr{"mesh.replicas", fmt.Sprintf("%q is not a role that can have replicas (agent, toolhost, approver, bridge, group, monitor)", role)}
		}
		if n < 0 || n > 64 {
			return &fieldErr{"mesh.replicas." + role, fmt.Sprintf("%d: use 0 to 64", n)}
		}
	}
	for role, s := range c.Monitor.Strategies {
		if s != "restart" && s != "replace" && s != "alert" {
			return &fieldErr{"monitor.strategies." + role, fmt.Sprintf("%q is not restart, replace or alert", s)}
		}
	}
	if c.NodeID != "" && !nameRE.MatchString(c.NodeID) {
		return &fieldErr{EnvNodeID, fmt.Sprintf("%q is not %s", c.NodeID, nameWant)}
	}
	return nil
}

// checkTools checks the MCP servers and the A2A agents. A command or url
// naming a variable that is empty here is taken as given: the tool host,
// which gets the variable, checks it ([Config.CheckTools]).
func (c *Config) checkTools() *fieldErr {
	seen := map[string]bool{}
	for i, s := range c.MCPServers {
		field := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case s.Name == "":
			return &fieldErr{field + ".name", "is required: " + nameWant}
		case !nameRE.MatchString(s.Name):
			return &fieldErr{field + ".name", fmt.Sprintf("%q is not %s", s.Name, nameWant)}
		case seen[s.Name]:
			return &fieldErr{field + ".name", fmt.Sprintf("%q is used twice", s.Name)}
		}
		if err := c.checkServer(field, s); err != nil {
			return err
		}
		seen[s.Name] = true
	}
	a2aSeen := map[string]bool{}
	for i, a := range c.A2A {
		if err := checkA2A(fmt.Sprintf("a2a[%d]", i), a, a2aSeen); err != nil {
			return err
		}
	}
	return nil
}

// checkServer checks that an MCP server has a command or a url, not both,
// and that its url is an http(s) one, unless it names a variable that is
// empty here.
func (c *Config) checkServer(field string, s MCPServer) *fieldErr {
	commandUnset, urlUnset := c.unset[field+".command"] != "", c.unset[field+".url"] != ""
	hasCommand, hasURL := s.Command != "" || commandUnset, s.URL != "" || urlUnset
	switch {
	case !hasCommand && !hasURL:
		return &fieldErr{field, "needs command (a stdio server) or url (a streamable HTTP server)"}
	case hasCommand && hasURL:
		return &fieldErr{field, "has both command and url: keep one"}
	}
	if s.URL != "" && !urlUnset {
		if err := checkURL(s.URL); err != nil {
			return &fieldErr{field + ".url", err.Error()}
		}
	}
	return nil
}

// CheckTools checks the MCP servers as the tool host, which starts and
// reaches them, needs them: every variable that a command or url names
// set. Load checked the rest; the other roles start without the tool
// host's variables. Errors name the field and the variable.
func (c *Config) CheckTools() error {
	for _, field := range slices.Sorted(maps.Keys(c.unset)) {
		if strings.HasPrefix(field, "mcp_servers[") {
			return &Error{File: c.Path, Field: field, Want: fmt.Sprintf("names the environment variable %s, which is empty or unset", c.unset[field])}
		}
	}
	return nil
}

// checkTree checks the agent tree: names, references expanded, node kinds and placeholders.
func (c *Config) checkTree() *fieldErr {
	if c.Agent != nil {
		if c.StateTool {
			return &fieldErr{"state_tool", "applies to the agent built from the top-level fields: with an agent: tree, set state_tool on its llm nodes"}
		}
		if err := checkNames("agent", c.Agent, map[string]string{}); err != nil {
			return err
		}
		defs := map[string]*Node{}
		collectDefs(c.Agent, defs)
		expanded, ferr := expandRefs("agent", c.Agent, defs, nil)
		if ferr != nil {
			return ferr
		}
		c.Agent = expanded
		if err := checkNode("agent", c.Agent); err != nil {
			return err
		}
		if err := checkPlaceholders("agent", c.Agent, producers(c.Agent)); err != nil {
			return err
		}
	}
	return nil
}

// checkGroups checks the group chats, setting their defaults.
func (c *Config) checkGroups() *fieldErr {
	groups := map[string]bool{}
	defined := map[string]Participant{}
	for i, g := range c.Groups {
		field := fmt.Sprintf("groups[%d]", i)
		switch {
		case g.Name == "" || !nameRE.MatchString(g.Name):
			return &fieldErr{field + ".name", "is required: " + nameWant}
		case groups[g.Name]:
			return &fieldErr{field + ".name", fmt.Sprintf("%q is used twice", g.Name)}
		case len(g.Participants) == 0:
			return &fieldErr{field + ".participants", "needs at least one participant"}
		}
		switch g.Strategy {
		case "", "round_robin", "priority", "router", "llm":
		default:
			return &fieldErr{field + ".strategy", fmt.Sprintf("%q is not one of round_robin, priority, router, llm", g.Strategy)}
		}
		if err := checkGroup(field, &c.Groups[i], c.Name, defined); err != nil {
			return err
		}
		if err := leaveOutDisabled(field, &c.Groups[i], c.Name, c.IsEnabled()); err != nil {
			return err
		}
		groups[g.Name] = true
	}
	return nil
}

// checkGroup validates a group and sets its defaults. defined records the
// agents participants define, so that two definitions of one agent must
// agree.
func checkGroup(field string, g *Group, mainAgent string, defined map[string]Participant) *fieldErr {
	if g.Strategy == "" {
		g.Strategy = StrategyRoundRobin
	}
	switch {
	case g.MaxTurns < 0:
		return &fieldErr{field + ".max_turns", "must not be negative"}
	case g.MaxConsecutive < 0:
		return &fieldErr{field + ".max_consecutive", "must not be negative"}
	case g.MinInterval < 0:
		return &fieldErr{field + ".min_interval", "must not be negative"}
	}
	if g.MaxTurns == 0 {
		g.MaxTurns = DefaultGroupMaxTurns
	}
	if g.MaxConsecutive == 0 {
		g.MaxConsecutive = DefaultGroupMaxConsecutive
	}
	if strings.TrimSpace(g.TerminationPhrase) == "" {
		g.TerminationPhrase = DefaultTerminationPhrase
	}
	members := map[string]bool{}
	for j, p := range g.Participants {
		pf := fmt.Sprintf("%s.participants[%d]", field, j)
		switch {
		case p.Agent == "" || !nameRE.MatchString(p.Agent):
			return &fieldErr{pf + ".agent", "is required: " + nameWant}
		case members[p.Agent]:
			return &fieldErr{pf + ".agent", fmt.Sprintf("%q is in the group twice", p.Agent)}
		case p.Defined() && p.Agent == mainAgent:
			return &fieldErr{pf + ".agent", fmt.Sprintf("%q is the top-level agent; leave out prompt and model to use it, or give the participant another name", p.Agent)}
		}
		members[p.Agent] = true
		if err := checkCapabilities(pf+".capabilities", p.Capabilities); err != nil {
			return err
		}
		for k, pat := range p.Patterns {
			if _, err := regexp.Compile(pat); err != nil {
				return &fieldErr{fmt.Sprintf("%s.patterns[%d]", pf, k), fmt.Sprintf("%q is not a regular expression: %v", pat, err)}
			}
		}
		for k, pat := range p.AfterTools {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				return &fieldErr{fmt.Sprintf("%s.after_tools[%d]", pf, k), fmt.Sprintf("%q is not a tool name or a pattern of them such as resources_*", pat)}
			}
		}
		if p.Defined() {
			if prev, ok := defined[p.Agent]; ok && (prev.Prompt != p.Prompt || prev.Model != p.Model) {
				return &fieldErr{pf, fmt.Sprintf("agent %q is defined twice with different prompts or models; define it once and name it alone elsewhere", p.Agent)}
			}
			defined[p.Agent] = p
		}
	}
	if g.Default != "" && !members[g.Default] {
		return &fieldErr{field + ".default", fmt.Sprintf("%q is not a participant of the group", g.Default)}
	}
	for from, tos := range g.AllowedTransitions {
		if !members[from] {
			return &fieldErr{field + ".allowed_transitions", fmt.Sprintf("%q is not a participant of the group", from)}
		}
		for _, to := range tos {
			if !members[to] {
				return &fieldErr{field + ".allowed_transitions." + from, fmt.Sprintf("%q is not a participant of the group", to)}
			}
		}
	}
	return nil
}

type fieldErr struct{ field, want string }

// leaveOutDisabled drops from a checked group the members that do not
// take part: those with enabled: false, and the top-level agent when it is
// disabled. The rest of the mesh then never sees them.
func leaveOutDisabled(field string, g *Group, mainAgent string, mainEnabled bool) *fieldErr {
	out := map[string]bool{}
	kept := g.Participants[:0:0]
	for _, p := range g.Participants {
		if !p.IsEnabled() || (!mainEnabled && !p.Defined() && p.Agent == mainAgent) {
			out[p.Agent] = true
			continue
		}
		kept = append(kept, p)
	}
	if len(out) == 0 {
		return nil
	}
	switch {
	case len(kept) == 0:
		return &fieldErr{field + ".participants", "has no enabled participant: every one has enabled: false (or is the disabled top-level agent)"}
	case out[g.Default]:
		return &fieldErr{field + ".default", fmt.Sprintf("%q is disabled: name an enabled participant", g.Default)}
	}
	g.Participants = kept
	for from, tos := range g.AllowedTransitions {
		if out[from] {
			delete(g.AllowedTransitions, from)
			continue
		}
		g.AllowedTransitions[from] = slices.DeleteFunc(slices.Clone(tos), func(to string) bool { return out[to] })
	}
	return nil
}

// checkCapabilities checks a list of declared capabilities.
func checkCapabilities(field string, caps []string) *fieldErr {
	for i, c := range caps {
		if strings.TrimSpace(c) == "" || len(c) > maxCapabilityLen {
			return &fieldErr{fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("must be a non-empty string of at most %d bytes", maxCapabilityLen)}
		}
	}
	return nil
}

// maxCapabilityLen bounds one declared capability: a word or a short phrase.
const maxCapabilityLen = 100

// checkApprovals checks the approver keys tool hosts trust.
func (c *Config) checkApprovals() *fieldErr {
	for i, k := range c.Approvals.PublicKeys {
		if !nkeys.IsValidPublicKey(k) {
			return &fieldErr{fmt.Sprintf("approvals.public_keys[%d]", i), "is not a public nkey (the approver logs its key at start: \"approver ready\", key O…)"}
		}
	}
	return nil
}

func checkA2A(field string, a A2AAgent, seen map[string]bool) *fieldErr {
	switch {
	case a.Name == "" || !nameRE.MatchString(a.Name):
		return &fieldErr{field + ".name", "is required: " + nameWant}
	case seen[a.Name]:
		return &fieldErr{field + ".name", fmt.Sprintf("%q is used twice", a.Name)}
	case a.URL == "":
		return &fieldErr{field + ".url", "is required: the agent's base URL, e.g. http://localhost:9092"}
	}
	if err := checkURL(a.URL); err != nil {
		return &fieldErr{field + ".url", err.Error()}
	}
	seen[a.Name] = true
	return nil
}

// collectDefs indexes the nodes defined (not referenced) in the tree.
func collectDefs(n *Node, defs map[string]*Node) {
	if n.Ref == "" && n.Name != "" {
		if _, dup := defs[n.Name]; !dup {
			defs[n.Name] = n
		}
	}
	for i := range n.Agents {
		collectDefs(&n.Agents[i], defs)
	}
}

// expandRefs replaces every ref by a copy of the node it names, and fails
// on a reference that leads back to a node being expanded (a cycle).
func expandRefs(field string, n *Node, defs map[string]*Node, stack []string) (*Node, *fieldErr) {
	if n.Ref != "" {
		if n.Name != "" || n.Type != "" || len(n.Agents) > 0 {
			return nil, &fieldErr{field + ".ref", fmt.Sprintf("a child with ref %q has no other fields", n.Ref)}
		}
		def, ok := defs[n.Ref]
		if !ok {
			return nil, &fieldErr{field + ".ref", fmt.Sprintf("no node is named %q", n.Ref)}
		}
		for _, name := range stack {
			if name == def.Name {
				return nil, &fieldErr{field + ".ref", fmt.Sprintf("node %q refers to %q, which contains it: a cycle (%s → %s)", stack[len(stack)-1], def.Name, strings.Join(stack, " → "), def.Name)}
			}
		}
		if len(stack) == 0 {
			return nil, &fieldErr{field + ".ref", "the root of the tree cannot be a ref"}
		}
		n = def
	}
	if n.Ref == "" {
		for _, name := range stack {
			if name == n.Name {
				return nil, &fieldErr{field, fmt.Sprintf("node %q contains itself through ref (cycle %s → %s)", n.Name, strings.Join(stack, " → "), n.Name)}
			}
		}
	}
	out := *n
	out.Agents = make([]Node, len(n.Agents))
	for i := range n.Agents {
		child, err := expandRefs(fmt.Sprintf("%s.agents[%d]", field, i), &n.Agents[i], defs, append(stack, n.Name))
		if err != nil {
			return nil, err
		}
		out.Agents[i] = *child
	}
	if len(n.Agents) == 0 {
		out.Agents = nil
	}
	return &out, nil
}

// placeholderRE matches a {key} placeholder of a prompt.
var placeholderRE = regexp.MustCompile(`\{([A-Za-z0-9_-]+)\}`)

// Placeholders lists the {key} placeholders of a prompt.
func Placeholders(prompt string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(prompt, -1) {
		out = append(out, m[1])
	}
	return out
}

// ResolvePlaceholders replaces each {key} placeholder of prompt by its value
// from lookup; a placeholder lookup does not know stays as written.
func ResolvePlaceholders(prompt string, lookup func(key string) (string, bool)) string {
	if !strings.Contains(prompt, "{") {
		return prompt
	}
	return placeholderRE.ReplaceAllStringFunc(prompt, func(m string) string {
		if v, ok := lookup(m[1 : len(m)-1]); ok {
			return v
		}
		return m
	})
}

// producers are the output keys of a tree.
func producers(n *Node) map[string]bool {
	out := map[string]bool{}
	var walk func(*Node)
	walk = func(n *Node) {
		if n.OutputKey != "" {
			out[n.OutputKey] = true
		}
		for i := range n.Agents {
			walk(&n.Agents[i])
		}
	}
	walk(n)
	return out
}

// checkPlaceholders fails on a placeholder no node produces.
func checkPlaceholders(field string, n *Node, produced map[string]bool) *fieldErr {
	for _, key := range Placeholders(n.Prompt) {
		if !produced[key] {
			return &fieldErr{field + ".prompt", fmt.Sprintf("node %q uses {%s}, but no node of the tree has output_key %s", n.Name, key, key)}
		}
	}
	for i := range n.Agents {
		if err := checkPlaceholders(fmt.Sprintf("%s.agents[%d]", field, i), &n.Agents[i], produced); err != nil {
			return err
		}
	}
	return nil
}

// checkNames makes sure the nodes the tree defines have unique names (a
// ref is not a definition).
func checkNames(field string, n *Node, names map[string]string) *fieldErr {
	if n.Ref == "" {
		if n.Name == "" || !nameRE.MatchString(n.Name) {
			return &fieldErr{field + ".name", "is required: " + nameWant}
		}
		if other, dup := names[n.Name]; dup {
			return &fieldErr{field + ".name", fmt.Sprintf("%q is also the name of %s; node names must be unique", n.Name, other)}
		}
		names[n.Name] = field
	}
	for i := range n.Agents {
		if err := checkNames(fmt.Sprintf("%s.agents[%d]", field, i), &n.Agents[i], names); err != nil {
			return err
		}
	}
	return nil
}

func checkNode(field string, n *Node) *fieldErr {
	if n.Name == "" || !nameRE.MatchString(n.Name) {
		return &fieldErr{field + ".name", "is required: " + nameWant}
	}
	switch n.Type {
	case NodeLLM:
		if len(n.Agents) > 0 {
			return &fieldErr{field + ".agents", fmt.Sprintf("node %q is an llm node and cannot have children", n.Name)}
		}
	case NodeSequential, NodeParallel, NodeLoop:
		if len(n.Agents) == 0 {
			return &fieldErr{field + ".agents", fmt.Sprintf("node %q is a %s node and needs children under agents:", n.Name, n.Type)}
		}
	case NodeA2A:
		if n.URL == "" {
			return &fieldErr{field + ".url", fmt.Sprintf("node %q is an a2a node and needs the remote agent's url", n.Name)}
		}
		if err := checkURL(n.URL); err != nil {
			return &fieldErr{field + ".url", err.Error()}
		}
	case "":
		return &fieldErr{field + ".type", fmt.Sprintf("node %q needs a type: llm, sequential, parallel, loop or a2a", n.Name)}
	default:
		return &fieldErr{field + ".type", fmt.Sprintf("node %q has unknown type %q: use llm, sequential, parallel, loop or a2a", n.Name, n.Type)}
	}
	if n.Timeout < 0 {
		return &fieldErr{field + ".timeout", "must not be negative"}
	}
	if n.MaxIterations < 0 {
		return &fieldErr{field + ".max_iterations", "must not be negative"}
	}
	if n.StateTool && n.Type != NodeLLM {
		return &fieldErr{field + ".state_tool", fmt.Sprintf("node %q is a %s node: only llm nodes are offered tools", n.Name, n.Type)}
	}
	if n.OutputKey != "" && !nameRE.MatchString(n.OutputKey) {
		return &fieldErr{field + ".output_key", fmt.Sprintf("%q is not %s", n.OutputKey, nameWant)}
	}
	if n.OutputSchema != nil {
		if n.Type != NodeLLM {
			return &fieldErr{field + ".output_schema", fmt.Sprintf("node %q is a %s node: only llm nodes answer with a schema", n.Name, n.Type)}
		}
		if _, err := ResolveOutputSchema(n.OutputSchema); err != nil {
			return &fieldErr{field + ".output_schema", err.Error()}
		}
	}
	seen := map[string]bool{}
	for i, a := range n.A2A {
		if err := checkA2A(fmt.Sprintf("%s.a2a[%d]", field, i), a, seen); err != nil {
			return err
		}
	}
	for i := range n.Agents {
		if err := checkNode(fmt.Sprintf("%s.agents[%d]", field, i), &n.Agents[i]); err != nil {
			return err
		}
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", s)
	}
	return nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 65535
}

func (c *Config) checkFiles() *fieldErr { return c.Files.validate(c.HTTP.MaxBodyBytes) }
