package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// mesh tools reads the tool catalog and calls tools over NATS with the
// admin's credentials, like `nats req mesh.tool.…`; it calls only read-only
// tools, which need no approval: a destructive call goes through an agent.

const toolsLong = `List the tool catalog, and call a read-only tool.

  mesh tools                            every tool, by server (same as list)
  mesh tools call SERVER TOOL '{"pattern": "web"}'

A tool that is not read-only runs only after a person approved that exact
call, which an agent asks for (mesh chat); call refuses it. A tool's own
failure (isError) exits 1.

It reads NATS as the mesh's admin (<data_dir>/creds/admin.nk), like the nats CLI.`

func toolsCommand(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools [list | call SERVER TOOL JSON]",
		Short: "list the tool catalog, call a read-only tool",
		Long:  toolsLong,
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(*cobra.Command, []string) error { return toolsList(o) },
	}
	o.jsonFlag(cmd)
	list := &cobra.Command{
		Use: "list", Short: "every tool, by server", Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error { return toolsList(o) },
	}
	call := &cobra.Command{
		Use: "call SERVER TOOL [JSON]", Short: "call a read-only tool with these arguments (default {})",
		Args: usageArgs(cobra.RangeArgs(2, 3)),
		RunE: func(_ *cobra.Command, args []string) error {
			raw := "{}"
			if len(args) == 3 {
				raw = args[2]
			}
			return toolsCall(o, args[0], args[1], raw)
		},
	}
	for _, c := range []*cobra.Command{list, call} {
		o.jsonFlag(c)
		cmd.AddCommand(c)
	}
	return cmd
}

// kind says what calling a tool takes.
func kind(t mesh.ToolEntry) string {
	switch {
	case t.ReadOnlyHint:
		return "read-only"
	case t.DestructiveHint:
		return "destructive"
	}
	return "writes"
}

func toolsList(o *clientOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, js, ns, err := o.admin(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, ns.Bucket(mesh.BucketTools))
	if err != nil {
		return fmt.Errorf("tools bucket: %w", err)
	}
	tools, err := store.NewCatalog(kv).List(ctx)
	if err != nil {
		return err
	}
	if tools == nil {
		tools = []mesh.ToolEntry{}
	}
	if o.json {
		return writeJSON(os.Stdout, tools)
	}
	if len(tools) == 0 {
		fmt.Println("no tools: is a tool host running?")
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SERVER\tTOOL\tKIND\tDESCRIPTION")
	for _, t := range tools {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", t.Server, t.Name, kind(t), oneLine(t.Description, 70))
	}
	return w.Flush()
}

func toolsCall(o *clientOptions, server, tool, raw string) error {
	var args map[string]any
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		return usageErr("arguments %q: want a JSON object: %v", raw, err)
	}
	if args == nil {
		args = map[string]any{}
	}
	if _, err := mesh.ToolKey(server, tool); err != nil {
		return usageErr("server %q: %v", server, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, js, ns, err := o.admin(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	kv, err := js.KeyValue(ctx, ns.Bucket(mesh.BucketTools))
	if err != nil {
		return fmt.Errorf("tools bucket: %w", err)
	}
	entry, err := findTool(ctx, store.NewCatalog(kv), server, tool)
	if err != nil {
		return err
	}
	if !entry.ReadOnlyHint {
		return fmt.Errorf("%s.%s is %s: it runs only after a person approves the call an agent asks for (mesh chat)", server, tool, kind(*entry))
	}
	res, err := bus.CallTool(ctx, nc, ns, server, tool, mesh.ToolRequest{CallID: "cli-" + mesh.NewID(), Arguments: args}, nil)
	if err != nil {
		return err
	}
	if o.json {
		if err := writeJSON(os.Stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Println(res.Text)
	}
	if res.IsError {
		return errQuiet
	}
	return nil
}

// findTool looks a tool up in the catalog.
func findTool(ctx context.Context, c *store.Catalog, server, tool string) (*mesh.ToolEntry, error) {
	tools, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range tools {
		if tools[i].Server == server && tools[i].Name == tool {
			return &tools[i], nil
		}
	}
	return nil, fmt.Errorf("no tool %s.%s in the catalog (mesh tools lists them)", server, tool)
}
