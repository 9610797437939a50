// Package provider is the spark provider: its configuration schema, and
// Configure, which builds the one SSH pool every resource and data source
// of this provider process shares.
package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/lab-infra/terraform-provider-spark/internal/datasources"
	"github.com/lab-infra/terraform-provider-spark/internal/planmemo"
	"github.com/lab-infra/terraform-provider-spark/internal/providerdata"
	"github.com/lab-infra/terraform-provider-spark/internal/raycluster"
	"github.com/lab-infra/terraform-provider-spark/internal/resources"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
	"github.com/lab-infra/terraform-provider-spark/internal/transport"
)

var _ provider.Provider = (*sparkProvider)(nil)

type sparkProvider struct {
	version string
}

// New returns the provider factory providerserver.Serve and tests use.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &sparkProvider{version: version} }
}

type providerModel struct {
	SSH         *sshModel   `tfsdk:"ssh"`
	MaxParallel types.Int64 `tfsdk:"max_parallel"`
}

type sshModel struct {
	User           types.String  `tfsdk:"user"`
	Port           types.Int64   `tfsdk:"port"`
	PrivateKey     types.String  `tfsdk:"private_key"`
	PrivateKeyFile types.String  `tfsdk:"private_key_file"`
	UseAgent       types.Bool    `tfsdk:"use_agent"`
	KnownHostsFile types.String  `tfsdk:"known_hosts_file"`
	HostKeyPolicy  types.String  `tfsdk:"host_key_policy"`
	ConnectTimeout types.String  `tfsdk:"connect_timeout"`
	Bastion        *bastionModel `tfsdk:"bastion"`
}

type bastionModel struct {
	Host    types.String `tfsdk:"host"`
	Port    types.Int64  `tfsdk:"port"`
	User    types.String `tfsdk:"user"`
	HostKey types.String `tfsdk:"host_key"`
}

func (p *sparkProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "spark"
	resp.Version = p.version
}

func (p *sparkProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Stands up Ray clusters and vLLM servers on on-prem GPU boxes over SSH, and catches the " +
			"network identity mistakes that make multi-homed deployments fail at `terraform plan`.",
		Attributes: map[string]schema.Attribute{
			"ssh": schema.SingleNestedAttribute{
				Optional:            true,
				MarkdownDescription: "How the provider reaches nodes. Every node object may override `ssh_port`, `ssh_user` and pin `host_key`.",
				Attributes: map[string]schema.Attribute{
					"user": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "SSH user. Default: `SPARK_SSH_USER`, else the local user, as `ssh` does.",
						Validators:          []validator.String{schemaparts.NotBlank("ssh.user", "an SSH user")},
					},
					"port": schema.Int64Attribute{
						Optional:            true,
						MarkdownDescription: "SSH port. Default: `SPARK_SSH_PORT`, else 22.",
						Validators:          []validator.Int64{int64validator.Between(1, 65535)},
					},
					"private_key": schema.StringAttribute{
						Optional:            true,
						Sensitive:           true,
						MarkdownDescription: "PEM private key (e.g. `file(\"~/.ssh/id_ed25519\")`). Default: `SPARK_SSH_PRIVATE_KEY`. Never logged.",
					},
					"private_key_file": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Path to a private key file, read by the provider. Default: `SPARK_SSH_PRIVATE_KEY_FILE`.",
					},
					"use_agent": schema.BoolAttribute{
						Optional: true,
						MarkdownDescription: "Offer the keys of the ssh-agent at `SSH_AUTH_SOCK`. Default: `SPARK_SSH_USE_AGENT`, " +
							"else on when `SSH_AUTH_SOCK` is set and no key is given.",
					},
					"known_hosts_file": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "known_hosts file to verify host keys against. Default: `SPARK_SSH_KNOWN_HOSTS_FILE`, else `~/.ssh/known_hosts`.",
					},
					"host_key_policy": schema.StringAttribute{
						Optional: true,
						MarkdownDescription: "`strict` (default; unknown or changed keys are errors), `accept-new` (unknown keys are " +
							"recorded in `known_hosts_file`, changed keys are errors) or `insecure` (nothing is checked; every plan warns). " +
							"Default: `SPARK_SSH_HOST_KEY_POLICY`, else `strict`.",
						Validators: []validator.String{stringvalidator.OneOf("strict", "accept-new", "insecure")},
					},
					"connect_timeout": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Bound on TCP connect plus SSH handshake, e.g. `30s`. Default: `SPARK_SSH_CONNECT_TIMEOUT`, else `30s`.",
						Validators:          []validator.String{schemaparts.Duration},
					},
					"bastion": schema.SingleNestedAttribute{
						Optional:            true,
						MarkdownDescription: "Jump host every node connection goes through. Its host key is verified like a node's. Default host: `SPARK_SSH_BASTION_HOST`.",
						Attributes: map[string]schema.Attribute{
							"host": schema.StringAttribute{Required: true, MarkdownDescription: "Bastion address.",
								Validators: []validator.String{schemaparts.NotBlank("ssh.bastion.host", "the bastion's address")}},
							"port": schema.Int64Attribute{Optional: true, MarkdownDescription: "Bastion SSH port. Default: `ssh.port`.",
								Validators: []validator.Int64{int64validator.Between(1, 65535)}},
							"user": schema.StringAttribute{Optional: true, MarkdownDescription: "Bastion user. Default: `ssh.user`.",
								Validators: []validator.String{schemaparts.NotBlank("ssh.bastion.user", "an SSH user")}},
							"host_key": schema.StringAttribute{Optional: true, MarkdownDescription: "Pins the bastion's host key (authorized_keys-style line).",
								Validators: []validator.String{schemaparts.HostKey}},
						},
					},
				},
			},
			"max_parallel": schema.Int64Attribute{
				Optional:            true,
				MarkdownDescription: "Concurrent SSH sessions across all nodes, provider-wide. Default: `SPARK_MAX_PARALLEL`, else 16.",
				Validators:          []validator.Int64{int64validator.Between(1, 1024)},
			},
		},
	}
}

// unknownAttributes lists, dotted, the configured values Terraform cannot
// know yet (they come from resources not yet created): the pool cannot be
// built from them. It walks the configuration itself, so every attribute,
// a new one too, is covered.
func unknownAttributes(cfg tftypes.Value) []string {
	var out []string
	_ = tftypes.Walk(cfg, func(p *tftypes.AttributePath, v tftypes.Value) (bool, error) {
		if v.IsKnown() {
			return true, nil
		}
		var names []string
		for _, s := range p.Steps() {
			if n, ok := s.(tftypes.AttributeName); ok {
				names = append(names, string(n))
			}
		}
		out = append(out, strings.Join(names, "."))
		return false, nil
	})
	slices.Sort(out) // the walk visits an object's attributes in no set order
	return out
}

func (p *sparkProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	if unknown := unknownAttributes(req.Config.Raw); len(unknown) > 0 {
		for _, a := range unknown {
			resp.Diagnostics.AddAttributeError(attrPath(a), "Provider configuration value not known at plan",
				fmt.Sprintf("provider \"spark\" attribute %s depends on a value that is only known after apply, so the provider "+
					"cannot connect to nodes during this plan. Set it statically (or through its SPARK_* environment "+
					"variable), or apply the resource it comes from first with -target.", a))
		}
		return
	}
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cfg, diagsErr := poolConfig(m, os.Getenv)
	if diagsErr != nil {
		resp.Diagnostics.AddError("Invalid SSH configuration", diagsErr.Error())
		return
	}
	pool, err := transport.NewPool(cfg)
	if err != nil {
		resp.Diagnostics.AddError("Invalid SSH configuration", err.Error())
		return
	}
	if cfg.Policy == transport.PolicyInsecure {
		resp.Diagnostics.AddWarning("SSH host keys are not verified",
			"provider \"spark\" has ssh.host_key_policy = \"insecure\": any machine that answers at a node's address is "+
				"trusted with your SSH session and secrets. Use \"strict\" with known_hosts_file, \"accept-new\", or pin host_key per node.")
	}
	tflog.Debug(ctx, "spark provider configured", map[string]any{
		"ssh_user": cfg.User, "ssh_port": cfg.Port, "host_key_policy": string(cfg.Policy),
		"known_hosts_file": cfg.KnownHostsFile, "use_agent": cfg.UseAgent, "bastion": cfg.Bastion != nil,
		"max_parallel": cfg.MaxParallel,
	})
	data := &providerdata.Data{Pool: pool, Clusters: raycluster.NewManager(pool), Memo: &planmemo.Memo{}}
	resp.DataSourceData = data
	resp.ResourceData = data
}

func attrPath(dotted string) path.Path {
	parts := strings.Split(dotted, ".")
	p := path.Root(parts[0])
	for _, s := range parts[1:] {
		p = p.AtName(s)
	}
	return p
}

// poolConfig merges configuration with SPARK_* environment fallbacks.
// Configuration wins; getenv is injected so this stays testable.
func poolConfig(m providerModel, getenv func(string) string) (transport.Config, error) {
	s := m.SSH
	if s == nil {
		s = &sshModel{}
	}
	str := func(v types.String, env string) string {
		if !v.IsNull() {
			return v.ValueString()
		}
		return getenv(env)
	}
	var cfg transport.Config
	var err error
	cfg.User = str(s.User, "SPARK_SSH_USER")
	if cfg.Port, err = intOr(s.Port, getenv, "SPARK_SSH_PORT"); err != nil {
		return cfg, err
	}
	cfg.PrivateKey = []byte(str(s.PrivateKey, "SPARK_SSH_PRIVATE_KEY"))
	cfg.PrivateKeyFile = expandHome(str(s.PrivateKeyFile, "SPARK_SSH_PRIVATE_KEY_FILE"))
	cfg.KnownHostsFile = expandHome(str(s.KnownHostsFile, "SPARK_SSH_KNOWN_HOSTS_FILE"))
	cfg.Policy = transport.HostKeyPolicy(str(s.HostKeyPolicy, "SPARK_SSH_HOST_KEY_POLICY"))
	switch {
	case !s.UseAgent.IsNull():
		cfg.UseAgent = s.UseAgent.ValueBool()
	case getenv("SPARK_SSH_USE_AGENT") != "":
		if cfg.UseAgent, err = strconv.ParseBool(getenv("SPARK_SSH_USE_AGENT")); err != nil {
			return cfg, fmt.Errorf("SPARK_SSH_USE_AGENT = %q is not a boolean: use true or false", getenv("SPARK_SSH_USE_AGENT"))
		}
	default:
		// Like Terraform's own provisioners: the agent when one runs and no key is given.
		cfg.UseAgent = getenv("SSH_AUTH_SOCK") != "" && len(cfg.PrivateKey) == 0 && cfg.PrivateKeyFile == ""
	}
	if t := str(s.ConnectTimeout, "SPARK_SSH_CONNECT_TIMEOUT"); t != "" {
		if cfg.ConnectTimeout, err = time.ParseDuration(t); err != nil || cfg.ConnectTimeout <= 0 {
			return cfg, fmt.Errorf("ssh.connect_timeout = %q is not a positive duration: write it like \"30s\"", t)
		}
	}
	if b := s.Bastion; b != nil {
		cfg.Bastion = &transport.Endpoint{Host: b.Host.ValueString(), Port: int(b.Port.ValueInt64()),
			User: b.User.ValueString(), HostKey: b.HostKey.ValueString()}
	} else if h := getenv("SPARK_SSH_BASTION_HOST"); h != "" {
		cfg.Bastion = &transport.Endpoint{Host: h, User: getenv("SPARK_SSH_BASTION_USER")}
		if cfg.Bastion.Port, err = intOr(types.Int64Null(), getenv, "SPARK_SSH_BASTION_PORT"); err != nil {
			return cfg, err
		}
	}
	if cfg.MaxParallel, err = intOr(m.MaxParallel, getenv, "SPARK_MAX_PARALLEL"); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func intOr(v types.Int64, getenv func(string) string, env string) (int, error) {
	if !v.IsNull() {
		return int(v.ValueInt64()), nil
	}
	if s := getenv(env); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s = %q is not a positive whole number", env, s)
		}
		return n, nil
	}
	return 0, nil
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

func (p *sparkProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{resources.NewRayCluster, resources.NewVLLMDeployment, resources.NewVLLMMPDeployment, resources.NewModel}
}

func (p *sparkProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{datasources.NewNode, datasources.NewRayNodes}
}
