package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/agentmesh/agentmesh/mesh"
	"github.com/agentmesh/agentmesh/mesh/bus"
	"github.com/agentmesh/agentmesh/mesh/store"
)

// mesh migrate reads the mesh's stored data as the admin and brings over
// what an older release left that this one does not take as it is. Today
// that is one thing: pending approvals recorded before approvals were
// sealed (before 0.1.0), which no approver approves until an admin has
// read them and the approver has sealed them.

const migrateLong = `Show what an older release left that this one needs brought over, then bring it over.

  mesh migrate              a dry run: the stored format of every stream and bucket,
                            and each pending approval an older release recorded
                            without a seal, with its arguments
  mesh migrate --apply      show each such approval again and have the approver seal
                            it, bound to the arguments shown; a person then decides it
                            as any other (mesh approve, the web page)
  mesh migrate --apply UUID…   only these

A pending approval without a seal cannot be approved: deciding it answers 409
approval_tampered. Read it first; one you do not recognise, reject instead
(mesh approve no UUID). Streams and buckets an older release made are marked
with this release's stored format when the mesh next provisions them (mesh up,
mesh provision). It reads NATS as the mesh's admin, and needs an approver running.`

// migrateReport is what mesh migrate --json prints.
type migrateReport struct {
	Release string               `json:"release"`
	Format  int                  `json:"stored_format"`
	Streams []store.StreamFormat `json:"streams"`
	// Unsealed are the pending approvals without a seal, as read.
	Unsealed []*mesh.Approval `json:"unsealed_approvals"`
	// Sealed are those --apply had the approver seal.
	Sealed []*mesh.Approval `json:"sealed_approvals,omitempty"`
	// Failed are those it could not, with why.
	Failed map[string]string `json:"failed,omitempty"`
}

func migrateCommand(o *clientOptions) *cobra.Command {
	var apply bool
	cmd := &cobra.Command{
		Use:   "migrate [--apply [UUID…]]",
		Short: "show, then bring over, what an older release left (approvals asked before seals)",
		Long:  migrateLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 && !apply {
				return usageErr("approval ids go with --apply")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return migrate(cmd.Context(), o, apply, args) },
	}
	cmd.Flags().BoolVar(&apply, "apply", false, "have the approver seal the approvals shown (all, or the UUIDs given)")
	o.jsonFlag(cmd)
	return cmd
}

func migrate(ctx context.Context, o *clientOptions, apply bool, only []string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nc, js, ns, err := o.admin(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	rep := migrateReport{Release: mesh.Release, Format: mesh.StoreFormat}
	if rep.Streams, err = store.StoredFormats(ctx, js, ns); err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, ns.Bucket(mesh.BucketApprovals))
	if err != nil {
		return fmt.Errorf("approvals bucket: %w", err)
	}
	pending, err := store.NewApprovalStore(kv).List(ctx, mesh.ApprovalPending)
	if err != nil {
		return err
	}
	for _, ap := range pending {
		if ap.Unsealed() && (len(only) == 0 || slices.Contains(only, ap.UUID)) {
			rep.Unsealed = append(rep.Unsealed, ap)
		}
	}
	slices.SortFunc(rep.Unsealed, func(a, b *mesh.Approval) int { return a.CreatedAt.Compare(b.CreatedAt) })
	for _, id := range only {
		if !slices.ContainsFunc(rep.Unsealed, func(ap *mesh.Approval) bool { return ap.UUID == id }) {
			return fmt.Errorf("approval %s is not a pending approval without a seal", id)
		}
	}
	if !o.json {
		printFormats(rep)
	}
	if apply {
		rep.Failed = map[string]string{}
		for _, ap := range rep.Unsealed {
			if !o.json {
				fmt.Println()
				printApproval(os.Stdout, ap)
			}
			sealed, err := resealApproval(ctx, nc, ns, ap)
			if err != nil {
				rep.Failed[ap.UUID] = err.Error()
				if !o.json {
					fmt.Printf("not sealed: %v\n", err)
				}
				continue
			}
			rep.Sealed = append(rep.Sealed, sealed)
			if !o.json {
				fmt.Printf("sealed: a person may now decide it (mesh approve yes|no %s)\n", ap.UUID)
			}
		}
	}
	if o.json {
		if err := writeJSON(os.Stdout, rep); err != nil {
			return err
		}
	} else if !apply {
		for _, ap := range rep.Unsealed {
			fmt.Println()
			printApproval(os.Stdout, ap)
		}
		if len(rep.Unsealed) > 0 {
			fmt.Printf("\nRead them; then `mesh migrate --apply` has the approver seal them, or `mesh approve no UUID` rejects one.\n")
		}
	}
	if len(rep.Failed) > 0 {
		return fmt.Errorf("%d of %d approvals not sealed", len(rep.Failed), len(rep.Unsealed))
	}
	return nil
}

// printFormats prints the stored formats and how many approvals wait for
// a seal.
func printFormats(rep migrateReport) {
	fmt.Printf("this mesh (%s) reads and writes stored format %d\n", rep.Release, rep.Format)
	t := newTable("STREAM", "STORED FORMAT")
	for _, s := range rep.Streams {
		f := fmt.Sprint(s.Format)
		if s.Format == 0 {
			f = "1, unmarked (made before 0.1.0; marked when the mesh next provisions)"
		}
		t.add(s.Stream, f)
	}
	_ = t.print(os.Stdout, stdoutWidth())
	switch n := len(rep.Unsealed); n {
	case 0:
		fmt.Println("no pending approval without a seal: nothing to bring over")
	default:
		fmt.Printf("%d pending approval(s) without a seal, asked before approvals were sealed: none can be approved until sealed\n", n)
	}
}

// resealApproval asks the approver to seal ap, bound to the hash of the
// arguments just printed.
func resealApproval(ctx context.Context, nc *nats.Conn, ns mesh.Namespace, ap *mesh.Approval) (*mesh.Approval, error) {
	hash, err := mesh.ArgsHash(ap.ToolArgs)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return bus.ResealApproval(ctx, nc, ns, ap.UUID, mesh.Reseal{ArgsHash: hash, By: localUser()})
}
