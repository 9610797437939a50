package resources_test

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/lab-infra/terraform-provider-spark/internal/acctest"
	"github.com/lab-infra/terraform-provider-spark/internal/lab"
	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/ray"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
)

// pgHolder is a Ray driver that takes one GPU in a placement group and
// holds it: what a running vLLM does to the GPUs it serves on, without
// vLLM (the lab's second Ray release has none). $1 the GCS address, $2 how
// long to hold, in seconds (a bound: it ends by itself).
const pgHolder = `import sys, time, ray
from ray.util.placement_group import placement_group
ray.init(address=sys.argv[1])
pg = placement_group([{"GPU": 1}])
ray.get(pg.ready(), timeout=60)
print("holding", pg.id.hex(), flush=True)
time.sleep(int(sys.argv[2]))
`

// Placement groups as the plan reads them from the GCS, on whichever Ray
// release the lab runs (make testacc-ray-next runs it on the second): a
// group holding a GPU is read as created, named by its driver, and refuses
// a deployment that needs that GPU (D8); once its driver is gone, the GCS
// keeps the group as removed, and the plan reads it so, holding nothing.
// Ray 2.35 and older number the states otherwise (CREATED=1); the reader
// maps them per release (internal/raygcs), which this reads on the nodes.
func TestAccRayCluster_placementGroupsRead(t *testing.T) {
	l := acctest.Lab(t)
	head, w := l.Nodes[0], l.Nodes[1]
	gcs := net.JoinHostPort(head.ExternalIP, "6379")
	cluster := rayCluster{workers: map[string]string{w.Name: ""}, extra: []string{`auth_mode = "disabled"`}}.config(l)
	// Both readers ask the cluster's own Ray (Ray's Python client is the
	// release's own: the lab's other release would read another table).
	rt := raycluster.Spec{Runtime: nodeexec.Runtime{RayCommand: head.RayCommand}}
	stopHolder := func() {
		_, _ = lab.ExecAs(context.Background(), head, l.SSHUser, "sh", "-c", "pkill -f '[s]park-pg-holder' ; true")
	}
	t.Cleanup(stopHolder)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { acctest.PreCheck(t) },
		ProtoV6ProviderFactories: acctest.Factories,
		CheckDestroy:             noRayLeft(l),
		Steps: []resource.TestStep{
			{
				Config: cluster,
				Check: resource.ComposeTestCheckFunc(
					func(*terraform.State) error { return holdGPU(l, head, gcs) },
					gcsReadersAgree(l, rt, "spark-pg-holder"),
				),
			},
			{
				// Two GPUs asked for, one of the cluster's two held.
				Config:      cluster + deploy{tp: 2}.config(l),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Not enough free GPUs.*only\s+1\s+of\s+the\s+cluster's\s+2\s+are\s+free.*placement\s+group\s+[0-9a-f]+\s+\(.*spark-pg-holder`),
			},
			{
				// The refusal started nothing; then the holder goes, and its
				// group stays in the GCS's table as removed.
				PreConfig: func() {
					for _, n := range l.Nodes {
						if out := acctest.RunningOrFail(t, n, acctest.VLLMServe); out != "" {
							t.Fatalf("the plan refused the deployment, but vLLM runs on %s:\n%s", n.Name, out)
						}
					}
					stopHolder()
				},
				Config: cluster,
				Check: resource.ComposeTestCheckFunc(
					func(*terraform.State) error { return groupRemoved(l, rt, gcs) },
					gcsReadersAgree(l, rt, ""),
				),
			},
		},
	})
}

// holdGPU starts pgHolder as the lab's SSH user on the node, with the
// cluster's Python, and waits (bounded) until its group is created.
func holdGPU(l *lab.File, n lab.Node, gcs string) error {
	ctx := context.Background()
	// The log of an earlier run goes first: its "holding" line would end
	// the wait below before this holder has its group.
	start := `rm -f /tmp/spark-pg-holder.log; printf '%s' "$3" > /tmp/spark-pg-holder.py && setsid "$1" /tmp/spark-pg-holder.py "$2" 900 > /tmp/spark-pg-holder.log 2>&1 < /dev/null &
for i in $(seq 1 90); do grep -q '^holding' /tmp/spark-pg-holder.log && exit 0; sleep 1; done
cat /tmp/spark-pg-holder.log; exit 1`
	if out, err := lab.ExecAs(ctx, n, l.SSHUser, "sh", "-c", start, "sh", n.PythonCommand, gcs, pgHolder); err != nil {
		return fmt.Errorf("the placement group holder on %s did not get its GPU: %w\n%s", n.Name, err, out)
	}
	return nil
}

// groupRemoved waits (bounded) until the GCS has every placement group the
// holder made as removed, holding no GPU the plan would count.
func groupRemoved(l *lab.File, spec raycluster.Spec, gcs string) error {
	m, spec, done, err := headReader(l, spec)
	if err != nil {
		return err
	}
	defer done()
	var t ray.Table
	for range 30 {
		if t, err = m.TableOverGRPC(context.Background(), spec, gcs); err == nil &&
			len(t.PlacementGroups) > 0 && !slices.ContainsFunc(t.PlacementGroups, func(g ray.PlacementGroup) bool { return g.State != "REMOVED" }) {
			return nil
		}
		time.Sleep(time.Second)
	}
	var states []string
	for _, g := range t.PlacementGroups {
		states = append(states, g.ID+" "+g.State)
	}
	return fmt.Errorf("the holder's placement group is not read as removed 30 s after its driver ended (%w): %s", err, strings.Join(states, ", "))
}
