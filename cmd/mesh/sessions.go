package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// mesh sessions reads and removes conversations over NATS with the admin's
// credentials (the sessions bucket, the events stream): every owner's, and
// removal, which the bridge's API does not offer; it is the operator's tool.

const sessionsLong = `List, show and remove the conversations of the mesh (every owner's).

  mesh sessions                 the conversations, newest first (same as list; --limit, --status, --owner)
  mesh sessions show ID         its messages, tool calls, results and pending approval
  mesh sessions rm ID           remove it and its events (--force for one that runs or waits)

Deleted conversations (DELETE /conversations/{id}) are listed as deleted until
they are removed; expired ones are no longer in the bucket.

It reads NATS as the mesh's admin (<data_dir>/creds/admin.nk), like the nats CLI.`

// listFilter is what mesh sessions list lists.
type listFilter struct {
	limit         int
	status, owner string
}

func sessionsCommand(o *clientOptions) *cobra.Command {
	f := &listFilter{}
	cmd := &cobra.Command{
		Use:   "sessions [list | show ID | rm ID]",
		Short: "list, show and remove conversations",
		Long:  sessionsLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(*cobra.Command, []string) error { return sessionsList(o, f) },
	}
	o.jsonFlag(cmd)
	list := &cobra.Command{
		Use: "list", Short: "the conversations, newest first", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return sessionsList(o, f) },
	}
	for _, c := range []*cobra.Command{cmd, list} {
		c.Flags().IntVar(&f.limit, "limit", 50, "list at most this many (0: all)")
		c.Flags().StringVar(&f.status, "status", "", "only conversations of this status (active, running, waiting_approval, deleted …)")
		c.Flags().StringVar(&f.owner, "owner", "", "only this principal's conversations")
	}
	show := &cobra.Command{
		Use: "show ID", Short: "one conversation", Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error { return sessionsShow(o, args[0]) },
	}
	var force bool
	rm := &cobra.Command{
		Use: "rm ID", Short: "remove a conversation and its events", Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error { return sessionsRemove(o, args[0], force) },
	}
	rm.Flags().BoolVar(&force, "force", false, "remove it even while a turn runs or an approval waits")
	for _, c := range []*cobra.Command{list, show, rm} {
		o.jsonFlag(c)
		cmd.AddCommand(c)
	}
	return cmd
}

// sessionStore connects as the admin and opens the sessions bucket.
func sessionStore(ctx context.Context, o *clientOptions) (*store.SessionStore, func(), jetstream.JetStream, mesh.Namespace, error) {
	nc, js, ns, err := o.admin(ctx)
	if err != nil {
		return nil, nil, nil, ns, err
	}
	kv, err := js.KeyValue(ctx, ns.Bucket(mesh.BucketSessions))
	if err != nil {
		nc.Close()
		return nil, nil, nil, ns, fmt.Errorf("sessions bucket: %w", err)
	}
	return store.NewSessionStore(kv, store.NewMessageLog(js, ns)), nc.Close, js, ns, nil
}

func sessionsList(o *clientOptions, f *listFilter) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, closeNC, _, _, err := sessionStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeNC()
	all, err := store.Summaries(ctx)
	if err != nil {
		return err
	}
	// Newest first, as GET /conversations pages them.
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID < all[j].ID
	})
	list := make([]mesh.ConversationSummary, 0, len(all))
	for _, s := range all {
		if f.status != "" && string(s.Status) != f.status || f.owner != "" && s.Owner != f.owner {
			continue
		}
		if f.limit > 0 && len(list) == f.limit {
			break
		}
		list = append(list, s)
	}
	if o.json {
		return writeJSON(os.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Println("no conversations")
		return nil
	}
	t := newTable("ID", "STATUS", "AGENT", "OWNER", "MESSAGES", "UPDATED", "TITLE").idColumns(0)
	for _, s := range list {
		agent := s.Agent
		if s.Group != "" {
			agent = "group " + s.Group
		}
		owner := s.Owner
		if owner == "" {
			owner = "-"
		}
		t.add(s.ID, string(s.Status), agent, owner, strconv.Itoa(s.MessageCount), s.UpdatedAt.Local().Format(time.DateTime), oneLine(s.Title, 200))
	}
	return t.print(os.Stdout, stdoutWidth())
}

func sessionsShow(o *clientOptions, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, closeNC, _, _, err := sessionStore(ctx, o)
	if err != nil {
		return err
	}
	defer closeNC()
	if !wholeID(id) {
		if id, err = sessionByPrefix(ctx, store, id); err != nil {
			return err
		}
	}
	c, err := store.Get(ctx, id)
	if err != nil {
		return err
	}
	if o.json {
		return writeJSON(os.Stdout, c)
	}
	agent := c.Agent
	if c.Group != nil {
		agent = "group " + c.Group.Name
	}
	fmt.Printf("conversation  %s (trace %s)\nstatus        %s\nagent         %s\n", c.ID, c.SessionID, c.Status, agent)
	if c.Owner != "" {
		fmt.Printf("owner         %s\n", c.Owner)
	}
	fmt.Printf("created       %s\nupdated       %s\n\n", c.CreatedAt.Local().Format(time.DateTime), c.UpdatedAt.Local().Format(time.DateTime))
	p := newChatPrinter(os.Stdout, c.Agent)
	p.history(c)
	for _, ap := range pendingOfConv(c) {
		p.approval(&mesh.Approval{UUID: ap.UUID, ToolName: ap.ToolName, Server: ap.Server, ToolArgs: ap.ToolArgs, Description: ap.Description})
	}
	return nil
}

// sessionByPrefix is the conversation whose id starts with prefix.
func sessionByPrefix(ctx context.Context, sessions *store.SessionStore, prefix string) (string, error) {
	all, err := sessions.Summaries(ctx)
	if err != nil {
		return "", err
	}
	ids := make([]string, 0, len(all))
	for _, s := range all {
		ids = append(ids, s.ID)
	}
	return byPrefix(prefix, "conversation", ids)
}

func pendingOfConv(c *mesh.Conversation) []mesh.PendingApproval {
	if len(c.PendingApprovals) > 0 {
		return c.PendingApprovals
	}
	if c.PendingApproval != nil {
		return []mesh.PendingApproval{*c.PendingApproval}
	}
	return nil
}

// sessionsRemove purges a conversation from the sessions bucket, its
// messages from the message log and its events from the events stream.
func sessionsRemove(o *clientOptions, id string, force bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, js, ns, err := o.admin(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, ns.Bucket(mesh.BucketSessions))
	if err != nil {
		return fmt.Errorf("sessions bucket: %w", err)
	}
	sessions := store.NewSessionStore(kv, store.NewMessageLog(js, ns))
	if !wholeID(id) {
		if id, err = sessionByPrefix(ctx, sessions, id); err != nil {
			return err
		}
	}
	head, err := sessions.HeadAny(ctx, id) // a deleted one too
	if err != nil {
		return err
	}
	switch head.Status {
	case mesh.StatusRunning, mesh.StatusQueued, mesh.StatusWaitingApproval:
		if !force {
			return fmt.Errorf("conversation %s is %s: cancel it (or decide its approval) first, or --force", id, head.Status)
		}
	}
	// Purge takes the head and the messages; the events are in a stream
	// of their own.
	if err := sessions.Purge(ctx, id); err != nil {
		return err
	}
	if err := store.PurgeEvents(ctx, js, ns, id); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	if o.json {
		return writeJSON(os.Stdout, map[string]any{"removed": id})
	}
	fmt.Printf("removed %s\n", id)
	return nil
}
