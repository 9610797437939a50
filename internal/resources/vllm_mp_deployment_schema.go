package resources

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/mpplan"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
	"github.com/lab-infra/terraform-provider-spark/internal/supervise"
)

// mpNodeAttributes are one node of a spark_vllm_mp_deployment.
func mpNodeAttributes() map[string]schema.Attribute {
	restart := " Changing it restarts every rank."
	attrs := schemaparts.NodeAccessResourceAttributes("", restart, false)
	attrs["rank"] = schema.Int64Attribute{Required: true, Validators: []validator.Int64{int64validator.AtLeast(0)},
		MarkdownDescription: "`--node-rank`: 0 serves the API; every other rank runs `--headless`. The nodes take the ranks 0 to N-1, one each." + restart}
	attrs["node_ip"] = schema.StringAttribute{Required: true, Validators: []validator.String{nodeIPValidator},
		MarkdownDescription: "The address this node uses on the fabric, set as its `VLLM_HOST_IP`: the address its ranks announce to the " +
			"others. Must be bound on the node." + restart}
	attrs["interface"] = schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.InterfaceName},
		MarkdownDescription: "This node's fabric interface (e.g. `enp1s0f0np0`), set as `GLOO_SOCKET_IFNAME` and `NCCL_SOCKET_IFNAME` on " +
			"this node only: two Sparks cabled on different ports name them differently. Checked at plan: it must exist, be up and " +
			"carry `node_ip`." + restart}
	attrs["process_identity"] = schema.StringAttribute{Computed: true, MarkdownDescription: "`<pid>:<start time>` of this node's `vllm serve`."}
	return attrs
}

func (r *mpResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	restart := " Changing it restarts every rank, behind the same readiness gate."
	probe, gbps := fabricProbeAttributes(probeWords{from: "rank 0's node", to: "each other node", between: "their `node_ip`",
		each: "node", what: "deployment", changed: "its nodes"})
	resp.Schema = schema.Schema{
		MarkdownDescription: "One model served across nodes by vLLM's own multi-node mode, with no Ray: `vllm serve --nnodes N " +
			"--node-rank R --master-addr A --master-port P` on every node, `--headless` on all but rank 0, which serves the API. " +
			"The plan reads every node first and refuses what would hang or fail: ranks that do not fit the world size, a master " +
			"address rank 0 does not hold or a node cannot reach, a fabric address or interface missing on its node, vLLM missing, " +
			"too old or differing, a port vLLM binds already taken, too small a `/dev/shm`, the model missing on a node.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`<rank 0 ssh_host>:<port>`.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"nodes": schema.MapNestedAttribute{Required: true,
				Validators:          []validator.Map{mapvalidator.KeysAre(schemaparts.WorkerName), mapvalidator.SizeAtLeast(1)},
				NestedObject:        schema.NestedAttributeObject{Attributes: mpNodeAttributes()},
				MarkdownDescription: "The nodes, keyed by a stable name (letters, digits, `.`, `_`, `-`), each with its rank."},
			"model": schema.StringAttribute{Required: true, Validators: []validator.String{schemaparts.Model},
				MarkdownDescription: "Model to serve: a Hugging Face name, or a directory that every node has at the same path (`spark_model` " +
					"copies it)." + restart},
			"served_model_name": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "`--served-model-name`; the model's when null." + restart},
			"tensor_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(1)}, MarkdownDescription: "`--tensor-parallel-size`, across all nodes. Default: 1." + restart},
			"pipeline_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(1)}, MarkdownDescription: "`--pipeline-parallel-size`. Default: 1." + restart},
			"data_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(1)},
				MarkdownDescription: "`--data-parallel-size` (with `--data-parallel-backend mp`): engines of tensor x pipeline ranks each, " +
					"spread over the nodes with them; rank 0 serves them all behind one API. The nodes must divide tensor x pipeline x " +
					"data parallel size." + restart},
			"master_addr": schema.StringAttribute{Optional: true, Computed: true, Validators: []validator.String{nodeIPValidator},
				MarkdownDescription: "`--master-addr`: where rank 0 serves torch's store, which every rank dials. Null: rank 0's `node_ip`." + restart},
			"master_port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(mpplan.DefaultMasterPort),
				Validators:          []validator.Int64{int64validator.Between(1, 65535)},
				MarkdownDescription: "`--master-port`, on rank 0. Default: 29501, vLLM's." + restart},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(8000),
				Validators: []validator.Int64{int64validator.Between(1, 65535)}, MarkdownDescription: "The API port on rank 0. Default: 8000." + restart},
			"api_key_wo": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
				Validators: []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("api_key_file")), schemaparts.APIKey},
				MarkdownDescription: "API key clients must send (`VLLM_API_KEY`, rank 0). Write-only (Terraform/OpenTofu 1.11+): never " +
					"stored in state or plan, never in a process's argv; it reaches rank 0 in a 0600 environment file. Bump " +
					"`api_key_wo_version` to rotate."},
			"api_key_wo_version": schema.Int64Attribute{Optional: true, MarkdownDescription: "Change to restart with a new `api_key_wo`."},
			"api_key_file": schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
				MarkdownDescription: "Alternative to `api_key_wo` for older CLIs: a file on rank 0's node holding the key, read there at launch." + restart},
			"secret_env_wo": schema.MapAttribute{Optional: true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
				Validators: []validator.Map{schemaparts.Env},
				MarkdownDescription: "Secret environment for vLLM on every node (e.g. `HF_TOKEN`), added to `env`. Write-only (Terraform/" +
					"OpenTofu 1.11+): written only to each rank's 0600 environment file, never to state, plan, argv or logs. Bump " +
					"`secret_env_wo_version` to restart with new values."},
			"secret_env_wo_version": schema.Int64Attribute{Optional: true, MarkdownDescription: "Change to restart with a new `secret_env_wo`."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{schemaparts.PlainEnv},
				MarkdownDescription: "Environment for vLLM on every node. Each node's `VLLM_HOST_IP`, `GLOO_SOCKET_IFNAME` and " +
					"`NCCL_SOCKET_IFNAME` come from its own `node_ip` and `interface`, over these." + restart},
			"extra_args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "More `vllm serve` arguments, on every node (e.g. `--max-model-len`)." + restart},
			"vllm_command": schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
				MarkdownDescription: "Path of `vllm` on every node. Default: `vllm`." + restart},
			"restart": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(supervise.No),
				Validators: []validator.String{stringvalidator.OneOf(supervise.Policies...)},
				MarkdownDescription: "What brings a rank back when its vLLM exits or its node reboots, named as Docker's restart policies. " +
					"`no` (the default): each rank is started detached, and one that dies stays down until the next apply (the plan " +
					"shows it as drift). `on-failure`: each rank runs as a systemd unit, started at boot and again after a crash, a " +
					"signal or a non-zero exit; `always`: after any exit. As root the units are system units; as another user, user " +
					"units, which start at boot only when that user lingers (`sudo loginctl enable-linger <user>`, once): the plan " +
					"refuses otherwise (D34). systemd waits 10 s between tries and gives up after 5 starts in 10 minutes. A restart " +
					"systemd made since the apply is a warning at plan, saying when and how the process last exited; a unit changed, " +
					"disabled or removed by hand, or one systemd gave up on, is drift the apply repairs. See \"Serving that survives " +
					"a reboot\" on this page." + restart},
			"endpoint":     schema.StringAttribute{Computed: true, MarkdownDescription: "OpenAI base URL: `http://<rank 0 ssh_host>:<port>/v1`."},
			"vllm_version": schema.StringAttribute{Computed: true, MarkdownDescription: "The vLLM version on rank 0's node, read at plan."},
			"status": schema.StringAttribute{Computed: true, MarkdownDescription: "`serving` when every rank runs and rank 0's `/health` " +
				"answers; otherwise which ranks stopped. Planned as `serving`: a stopped rank is a change the apply makes."},
			"fabric_probe": probe,
			"fabric_gbps":  gbps,
			"timeouts":     timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}
