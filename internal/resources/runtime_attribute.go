package resources

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/lab-infra/terraform-provider-spark/internal/nodeexec"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

// runtimeAttribute is where Ray runs on each node, shared by both resources
// (a deployment takes its cluster's runtime as is). Changing it replaces
// what runs, except right after an import, when it cannot be read back.
func runtimeAttribute() schema.SingleNestedAttribute {
	replaceObj := []planmodifier.Object{objectplanmodifier.RequiresReplaceIf(replaceObjectUnlessImported,
		"Replaces the cluster when changed.", "Replaces the cluster when changed.")}
	return schema.SingleNestedAttribute{Optional: true, PlanModifiers: replaceObj,
		MarkdownDescription: "Where Ray runs on each node: `host` (default) or `container`. Exactly one.",
		Attributes: map[string]schema.Attribute{
			"host": schema.SingleNestedAttribute{Optional: true, MarkdownDescription: "Ray installed on the box.",
				Validators: []validator.Object{objectvalidator.ExactlyOneOf(path.MatchRelative().AtParent().AtName("container"))},
				Attributes: map[string]schema.Attribute{
					"ray_command": schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
						MarkdownDescription: "Path of `ray`. Default: `ray` on the SSH session's PATH."},
				}},
			"container": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Ray inside a container on each node (`docker run -d --network host --ipc host …`, then `docker exec`).",
				Attributes: map[string]schema.Attribute{
					"image":    schema.StringAttribute{Required: true, Validators: []validator.String{schemaparts.Image}, MarkdownDescription: "Image with Ray (and vLLM) installed."},
					"name":     schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.ContainerName}, MarkdownDescription: "Container name, one per cluster on a node. Default: `ray-node-<gcs_port>`. A container of that name that another cluster (or no cluster of this provider) owns is refused."},
					"shm_size": schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.ShmSize}, MarkdownDescription: "`--shm-size`. Default: `10g`."},
					"gpus":     schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.GPUs}, MarkdownDescription: "`--gpus`. Default: `all`; empty string for none."},
					"run_args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
						Validators: []validator.List{listvalidator.ValueStringsAre(schemaparts.DockerRunArg)}, MarkdownDescription: "Extra `docker run` arguments, each quoted. `--name`, `--network`, `--ipc`, `--shm-size` and `--gpus` are refused: the provider sets them."},
					"ray_command": schema.StringAttribute{Optional: true, Validators: []validator.String{schemaparts.Path},
						MarkdownDescription: "Path of `ray` inside the container. Default: `ray`."},
				}},
		}}
}

type runtimeModel struct {
	Host      *hostRuntimeModel      `tfsdk:"host"`
	Container *containerRuntimeModel `tfsdk:"container"`
}

type hostRuntimeModel struct {
	RayCommand types.String `tfsdk:"ray_command"`
}

type containerRuntimeModel struct {
	Image      types.String `tfsdk:"image"`
	Name       types.String `tfsdk:"name"`
	ShmSize    types.String `tfsdk:"shm_size"`
	GPUs       types.String `tfsdk:"gpus"`
	RunArgs    types.List   `tfsdk:"run_args"`
	RayCommand types.String `tfsdk:"ray_command"`
}

// runtime is where the cluster whose GCS listens on gcsPort runs (its
// container's default name and owner follow from the port); null is the
// host. A deployment runs where its cluster does, so both resources read
// the same attribute through this one function.
func (rt *runtimeModel) runtime(ctx context.Context, gcsPort int) (nodeexec.Runtime, diag.Diagnostics) {
	var diags diag.Diagnostics
	switch {
	case rt == nil || rt.Host != nil:
		r := nodeexec.Runtime{}
		if rt != nil {
			r.RayCommand = rt.Host.RayCommand.ValueString()
		}
		return r, diags
	default:
		c := rt.Container
		out := nodeexec.Container{Image: c.Image.ValueString(), Name: or(c.Name, nodeexec.DefaultName(gcsPort)), Owner: nodeexec.OwnerOf(gcsPort), ShmSize: or(c.ShmSize, "10g"), GPUs: or(c.GPUs, "all")}
		diags.Append(c.RunArgs.ElementsAs(ctx, &out.RunArgs, false)...)
		if err := out.Validate(); err != nil {
			diags.AddAttributeError(path.Root("runtime").AtName("container"), "Invalid container runtime", err.Error())
		}
		return nodeexec.Runtime{RayCommand: c.RayCommand.ValueString(), Container: &out}, diags
	}
}
