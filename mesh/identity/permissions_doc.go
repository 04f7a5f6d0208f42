package identity

import (
	"fmt"
	"strings"

	"github.com/agentmesh/agentmesh/mesh"
)

// PermissionsMarkdown renders the permission table of namespace n as
// markdown: a summary by role, then the exact subjects the server allows
// each identity (ARCHITECTURE.md carries its output;
// mesh/identity/testdata/permissions.md is its golden copy).
func PermissionsMarkdown(n mesh.Namespace) string {
	var b strings.Builder
	buckets := []string{mesh.BucketSessions, mesh.BucketApprovals, mesh.BucketTools, mesh.BucketNodes, mesh.BucketCalls, mesh.BucketLimits, mesh.BucketUsage}
	b.WriteString("| role | publishes | requests | subscribes, serves | consumes |")
	for _, bk := range buckets {
		fmt.Fprintf(&b, " `%s` |", n.Bucket(bk))
	}
	b.WriteString("\n|---|---|---|---|---|" + strings.Repeat("---|", len(buckets)) + "\n")
	for _, role := range Roles() {
		var pubs, reqs, subs, cons []string
		kv := map[string][]string{}
		for _, g := range roleGrants(n, role) {
			switch g.Kind {
			case GrantPublish, GrantStore:
				pubs = appendNew(pubs, code(g.Subject))
			case GrantRequest:
				reqs = appendNew(reqs, code(g.Subject))
			case GrantSubscribe:
				subs = appendNew(subs, code(g.Subject))
			case GrantServe:
				if strings.HasPrefix(g.Subject, "$SRV.") {
					continue // service discovery, in the note below
				}
				subs = appendNew(subs, code(g.Subject)+" (serves)")
			case GrantConsume:
				cons = append(cons, fmt.Sprintf("%s as %s (%s)", code(g.Subject), code(g.Consumer), code(g.Filter)))
			case GrantConsumerInfo:
				cons = append(cons, fmt.Sprintf("%s: state of %s", code(g.Subject), code(g.Consumer)))
			case GrantConsumerList:
				cons = append(cons, fmt.Sprintf("%s: list of consumers' state", code(g.Subject)))
			case GrantStreamGet:
				cons = append(cons, fmt.Sprintf("%s: get by subject (%s)", code(g.Subject), code(g.Filter)))
			case GrantLog:
				cons = append(cons, fmt.Sprintf("%s: append (%s), direct get", code(g.Subject), code(g.Filter)))
			case GrantFollow:
				cons = append(cons, fmt.Sprintf("%s, ordered (%s)", code(g.Subject), code(g.Filter)))
			case GrantKVRead, GrantKVWatch, GrantKVWrite:
				what := map[GrantKind]string{GrantKVRead: "get", GrantKVWatch: "watch", GrantKVWrite: "write"}[g.Kind]
				if g.Filter != "" {
					what += " " + code(g.Filter)
				}
				kv[g.Subject] = append(kv[g.Subject], what)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |", role, cell(pubs), cell(reqs), cell(subs), cell(cons))
		for _, bk := range buckets {
			fmt.Fprintf(&b, " %s |", cell(kv[bk]))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "| %s | everything | everything | everything | everything |%s\n\n", RoleAdmin, strings.Repeat(" everything |", len(buckets)))
	fmt.Fprintf(&b, "Every role also publishes its heartbeats on %s, writes its own key %s in %s, answers %s, "+
		"listens on %s, and subscribes only to its own inbox %s (`nats.CustomInboxPrefix`; it may publish there too, "+
		"which is how its connection answers a request it refuses to send). The toolhost and the approver also answer the micro service discovery "+
		"subjects (`$SRV.*`) of %s and %s. No role but %s creates, updates, purges or deletes a stream or bucket, "+
		"reads a stream's messages by sequence (`STREAM.MSG.GET`, `DIRECT.GET` of a stream) except the bridge's "+
		"look-up of the work items it queued and the direct gets of the message log %s by the roles that keep conversations, or consumes %s except through the consumers above.\n\n",
		code(n.Prefix()+".hb.<role>.*"), code("<role>.*"), code(n.Bucket(mesh.BucketNodes)), code(n.ProbeAll()),
		code(n.RestartAll()), code(n.Inbox("<role>")+".>"),
		code(mesh.ToolServiceName), code(mesh.ApprovalServiceName), RoleAdmin, code(n.Stream(mesh.StreamMessages)), code(n.Stream(mesh.StreamWork)))
	fmt.Fprintf(&b, "A role serves (\"serves\" above, the probe and the discovery subjects) only with its responder identity %s, "+
		"on a connection of its own: that identity subscribes to what the role serves and publishes nothing but answers to inboxes. "+
		"No identity has `allow_responses`, so the server refuses a reply to any other subject, whatever reply subject a requester chose. "+
		"A responder answers the inboxes of the roles that request what it serves, and the default inboxes %s of operators' clients (the nats CLI):\n\n",
		code("<role>"+ResponderSuffix), codeJoin(OperatorInboxes()))
	b.WriteString("| responder | serves | answers |\n|---|---|---|\n")
	for _, role := range Roles() {
		p, _ := PermissionsOf(n, Responder(role))
		var serves, answers []string
		for _, g := range p.Grants {
			switch g.Kind {
			case GrantServe:
				serves = append(serves, code(g.Subject))
			case GrantReply:
				answers = append(answers, code(g.Subject))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", p.Role, strings.Join(serves, ", "), strings.Join(answers, ", "))
	}
	b.WriteString("\nExact subjects the server allows (`identity.PermissionsOf`):\n\n")
	b.WriteString("| identity | publish | subscribe |\n|---|---|---|\n")
	for _, name := range append(Identities(), RoleAdmin) {
		p, _ := PermissionsOf(n, name)
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, codeList(p.Publish), codeList(p.Subscribe))
	}
	return b.String()
}

func code(s string) string { return "`" + s + "`" }

func cell(items []string) string {
	if len(items) == 0 {
		return "-"
	}
	return strings.Join(items, ", ")
}

func codeJoin(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = code(s)
	}
	return strings.Join(out, " and ")
}

func codeList(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = code(s)
	}
	return strings.Join(out, "<br>")
}
