// Package providerdata is what the provider's Configure hands every
// resource and data source: the shared SSH pool, the cluster manager, the
// plan memo, and the deadline a read at plan runs under. Schema fragments
// and validators are internal/attrs'.
package providerdata

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	"github.com/lab-infra/terraform-provider-spark/internal/planmemo"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

// Data is set by the provider's Configure.
type Data struct {
	Pool     *transport.Pool
	Clusters *raycluster.Manager // one per provider process: shares node-table snapshots
	Memo     *planmemo.Memo      // what this run's plans concluded, for the plans after them
}

// From recovers Data in a resource's or data source's Configure. A nil
// input is normal: Terraform calls Configure on them before the provider's.
func From(in any) (*Data, diag.Diagnostics) {
	var diags diag.Diagnostics
	if in == nil {
		return nil, diags
	}
	d, ok := in.(*Data)
	if !ok {
		diags.AddError("Unexpected provider data",
			fmt.Sprintf("Expected *providerdata.Data, got %T. This is always a bug in the provider.", in))
	}
	return d, diags
}

// ReadDeadline bounds one plan or refresh: reading nodes never changes
// them, so a node that does not answer within it (a hung nvidia-smi, a
// frozen host) fails the plan, naming the node and the step, instead of
// hanging it. Generous for what a read does (a few seconds), short for a
// person waiting on `terraform plan`.
const ReadDeadline = 90 * time.Second

// WithReadDeadline is ctx bounded by ReadDeadline; a command cut off by it
// reports why (transport reports context.Cause).
func WithReadDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, ReadDeadline,
		fmt.Errorf("no answer within %s, the provider's deadline for reading a node during plan or refresh", ReadDeadline))
}
