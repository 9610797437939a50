package resources

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/inputs"
	"github.com/lab-infra/terraform-provider-spark/internal/preflight"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
	"github.com/lab-infra/terraform-provider-spark/internal/vllm"
)

// hostIPValidator is the config-time host_ip check (rule D2).
var hostIPValidator = schemaparts.StringCheck{Desc: "a literal IP address", Summary: "Invalid host_ip",
	Check: func(_, v string) error { return inputs.HostIP(v) }, Cite: preflight.D2.Cite()}

func (r *vllmResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	headAttrs := schemaparts.NodeAccessResourceAttributes("The Ray head's SSH address: `vllm serve` runs there.",
		" Changing it moves the deployment.", true)
	restart := "Changing it restarts the server in place, behind the same readiness gate."
	resp.Schema = schema.Schema{
		MarkdownDescription: "`vllm serve` on the head of a Ray cluster. The plan checks, from Ray's live node table, that the " +
			"address vLLM pins its placement group to (`host_ip`, else vLLM's own detection on the head) is the address Ray " +
			"registered for the head, and that tensor x pipeline parallel size fits the GPUs Ray registered. Create waits until " +
			"`/health`, `/v1/models` and a 1-token completion all answer.",
		Attributes: map[string]schema.Attribute{
			"id":          schema.StringAttribute{Computed: true, MarkdownDescription: "`<ssh_host>:<port>`.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"head":        schema.SingleNestedAttribute{Required: true, Attributes: headAttrs, MarkdownDescription: "The Ray head, where `vllm serve` runs."},
			"runtime":     runtimeAttribute(),
			"ray_address": schema.StringAttribute{Required: true, Validators: []validator.String{schemaparts.HostPort}, MarkdownDescription: "`<head registered ip>:<gcs port>`, usually `spark_ray_cluster.<name>.head_address`. Set as `RAY_ADDRESS` so vLLM joins that cluster and never starts its own."},
			"model":       schema.StringAttribute{Required: true, Validators: []validator.String{schemaparts.Model}, MarkdownDescription: "Model to serve (a Hugging Face name or a path on the head). " + restart},
			"served_model_name": schema.StringAttribute{Optional: true, Computed: true,
				Validators:          []validator.String{schemaparts.NotBlank("served_model_name", "the name clients use")},
				MarkdownDescription: "Name clients use (`--served-model-name`). Default: `model`. " + restart},
			"tensor_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(1)}, MarkdownDescription: "`--tensor-parallel-size`. " + restart},
			"pipeline_parallel_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1),
				Validators: []validator.Int64{int64validator.AtLeast(1)}, MarkdownDescription: "`--pipeline-parallel-size`. " + restart},
			"host_ip": schema.StringAttribute{Optional: true, Validators: []validator.String{hostIPValidator},
				MarkdownDescription: "`VLLM_HOST_IP`. Must be the IP Ray registered for the head (checked at plan). Null: vLLM's own " +
					"detection on the head (the route to 8.8.8.8), shown as `placement_ip`. " + restart},
			"port": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(8000),
				PlanModifiers: []planmodifier.Int64{int64planmodifier.RequiresReplace()},
				Validators:    []validator.Int64{int64validator.Between(1, 65535)}, MarkdownDescription: "HTTP port. Default 8000. Not the head's GCS port."},
			"host": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(vllm.DefaultHost),
				Validators: []validator.String{schemaparts.Address},
				MarkdownDescription: "`--host`: the address vLLM listens on. Default `0.0.0.0`, every address of the head, with a plan " +
					"warning when no API key is set; `127.0.0.1` keeps it to the head itself. " + restart},
			"api_key_wo": schema.StringAttribute{Optional: true, Sensitive: true, WriteOnly: true,
				Validators: []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("api_key_file")), schemaparts.APIKey},
				MarkdownDescription: "API key clients must send (`VLLM_API_KEY`). Write-only (Terraform/OpenTofu 1.11+): never stored in " +
					"state or plan, never in the process's argv. Bump `api_key_wo_version` to rotate."},
			"api_key_wo_version": schema.Int64Attribute{Optional: true, MarkdownDescription: "Change to restart with a new `api_key_wo`."},
			"api_key_file": schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
				MarkdownDescription: "Alternative to `api_key_wo` for older CLIs: a file on the head holding the key, read there at launch."},
			"secret_env_wo": schema.MapAttribute{Optional: true, Sensitive: true, WriteOnly: true, ElementType: types.StringType,
				Validators: []validator.Map{schemaparts.Env},
				MarkdownDescription: "Secret environment for `vllm serve` (e.g. `HF_TOKEN`), added to `env`. Write-only (Terraform/OpenTofu " +
					"1.11+): written only to the server's 0600 environment file on the head, never to state, plan, argv or logs. " +
					"Bump `secret_env_wo_version` to restart with new values."},
			"secret_env_wo_version": schema.Int64Attribute{Optional: true, MarkdownDescription: "Change to restart with a new `secret_env_wo`."},
			"env": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{schemaparts.PlainEnv},
				MarkdownDescription: "Environment for `vllm serve` (e.g. `NCCL_SOCKET_IFNAME`); interface names are checked on the head. " +
					"Stored in state: names that hold secrets (`HF_TOKEN`, `*_API_KEY`, `*_SECRET`, `*_PASSWORD`, ...) are refused here; " +
					"give them in `secret_env_wo`, `VLLM_API_KEY` in `api_key_wo`. " + restart},
			"extra_args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				Validators: []validator.List{listvalidator.ValueStringsAre(schemaparts.VLLMServeArg)},
				MarkdownDescription: "Extra `vllm serve` arguments, each passed as one quoted argument. Flags the provider sets " +
					"(`--model`, `--served-model-name`, `--tensor-parallel-size`/`-tp`, `--pipeline-parallel-size`/`-pp`, " +
					"`--distributed-executor-backend`, `--host`, `--port`, `--uds`, `--api-key`, `--config`) are refused in every " +
					"spelling vLLM reads (underscores, unambiguous prefixes). " + restart},
			"vllm_command": schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path}, MarkdownDescription: "Path of `vllm` on the head. Default: `vllm`."},
			"endpoint":     schema.StringAttribute{Computed: true, MarkdownDescription: "OpenAI base URL: `http://<ssh_host>:<port>/v1`, or on `host` when vLLM listens on one address only."},
			"placement_ip": schema.StringAttribute{Computed: true, MarkdownDescription: "The head's address as vLLM places by it: " +
				"where `placement_pinned`, the address bundle 0 of its placement group is pinned to (`node:<ip>`: `VLLM_HOST_IP`, else vLLM's " +
				"detection); otherwise the address Ray registered for the head, which RayExecutorV2 uses."},
			"vllm_version": schema.StringAttribute{Computed: true, MarkdownDescription: "The vLLM version on the head, read where " +
				"`vllm serve` runs (the runtime's container or the host). The placement rule follows it."},
			"executor": schema.StringAttribute{Computed: true, MarkdownDescription: "The Ray executor this vLLM will run: " +
				"`RayDistributedExecutor` (the legacy one) or `RayExecutorV2`, from the version and `VLLM_USE_RAY_V2_EXECUTOR_BACKEND` " +
				"(in `env`, else in the head's environment, else the release's default)."},
			"placement_pinned": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether this vLLM pins bundle 0 of its " +
				"placement group to `node:<VLLM_HOST_IP>`. Where it does, an address Ray did not register for the head is an error at " +
				"plan (the placement group would never be placed); where it does not, a warning."},
			"process_identity": schema.StringAttribute{Computed: true, MarkdownDescription: "`<pid>:<start time>` of the server process."},
			"status":           schema.StringAttribute{Computed: true, MarkdownDescription: "`serving` when the process runs and `/health` answers; otherwise what was found. Planned as `serving`."},
			"timeouts":         timeouts.Attributes(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}
