package preflight

import (
	"testing"

	"github.com/lab-infra/terraform-provider-spark/internal/nodefacts"
)

// D32 through CheckDeployment: the model's config.json read with the
// head's listing, each node's memory from the cluster's plan. A rank may
// be placed on either node, so the roomiest judges: refused only when
// neither has the cache free.
func TestCheckDeploymentMemoryFit(t *testing.T) {
	const config = `{"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "dtype": "float32", "max_position_embeddings": 512}`
	setup := func(headAvail, workerAvail int64, args ...string) Deployment {
		d := fieldReportDeployment()
		acrossNodes(&d)
		d.Env["NCCL_SOCKET_IFNAME"] = "enP7s7"
		d.HeadFacts.VLLMVersion = "0.32.0+cpu"
		d.HeadFacts.Memory = nodefacts.Memory{Total: 24 << 30, Available: headAvail}
		d.Nodes[0].Facts = d.HeadFacts
		d.Nodes[1].Facts.VLLMVersion = "0.32.0+cpu"
		d.Nodes[1].Facts.Memory = nodefacts.Memory{Total: 24 << 30, Available: workerAvail}
		l := d.Listings["head"]
		l.Config = []byte(config)
		d.Listings["head"] = l
		d.Env["VLLM_CPU_KVCACHE_SPACE"] = "8"
		d.ExtraArgs = append([]string{"--dtype", "float32"}, args...)
		return d
	}
	if _, found := CheckDeployment(setup(20<<30, 2<<30, "--max-model-len", "512")); len(found) != 0 {
		t.Fatalf("the head has 20 GiB free for an 8 GiB cache: %s", allSummaries(found))
	}
	_, found := CheckDeployment(setup(3<<30, 2<<30, "--max-model-len", "512"))
	one(t, found, "not free on the node", "the one with the most, head, has 3.00 GiB available", "8.00 GiB KV cache", "stop another deployment")
	if found[0].Rule != D32 || found[0].Path.String() != "env" || found[0].Warning {
		t.Errorf("%+v", found[0])
	}
	// Our own server restarting: what it holds comes back, so free memory is not judged.
	d := setup(3<<30, 2<<30, "--max-model-len", "512")
	d.Restart = true
	if _, found := CheckDeployment(d); len(found) != 0 {
		t.Fatalf("a restart judged on memory its own server holds: %s", allSummaries(found))
	}
	// A model whose config.json was not read is not judged.
	d = setup(3<<30, 2<<30)
	l := d.Listings["head"]
	l.Config = nil
	d.Listings["head"] = l
	if _, found := CheckDeployment(d); len(found) != 0 {
		t.Fatalf("judged without config.json: %s", allSummaries(found))
	}
	// An unreadable memory flag names the attribute and the value.
	_, found = CheckDeployment(setup(20<<30, 2<<30, "--max-model-len", "1.5K"))
	one(t, found, "extra_args --max-model-len \"1.5K\"")
}
