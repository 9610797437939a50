package resources

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/lab-infra/terraform-provider-spark/internal/schemaparts"
)

// Unit tests of spark_vllm_deployment's plan steps and import ID
// (vllm_deployment.go): pure functions of the plan and the state.

// servingDeployment is a state: a server that serves.
func servingDeployment() *vllmModel {
	m := deploymentModel()
	m.Head = &headAccess{NodeAccess: schemaparts.NodeAccess{SSHHost: types.StringValue("spark1")}}
	m.Status = types.StringValue(statusServing)
	m.ProcessIdentity = types.StringValue("123:456")
	m.PlacementIP, m.VLLMVersion = types.StringValue("10.0.0.1"), types.StringValue("0.11.0")
	m.Executor, m.PlacementPinned = types.StringValue("RayDistributedExecutor"), types.BoolValue(true)
	return m
}

func TestEndpoint(t *testing.T) {
	for _, c := range []struct {
		host types.String
		want string
	}{
		{types.StringValue("0.0.0.0"), "http://spark1:8000/v1"},
		{types.StringValue("::"), "http://spark1:8000/v1"},
		{types.StringValue("127.0.0.1"), "http://127.0.0.1:8000/v1"},
		{types.StringValue("fd00::1"), "http://[fd00::1]:8000/v1"},
		{types.StringValue("localhost"), "http://localhost:8000/v1"},
		{types.StringValue("spark1.lan"), "http://spark1:8000/v1"}, // a name: the head's SSH address
	} {
		m := servingDeployment()
		m.Host = c.host
		if got := m.endpoint(); got.ValueString() != c.want {
			t.Errorf("host %s: endpoint %v, want %s", c.host, got, c.want)
		}
	}
	m := servingDeployment()
	m.Host = types.StringUnknown()
	if !m.endpoint().IsUnknown() {
		t.Error("an unknown host gave a known endpoint")
	}
}

func TestPlanComputed(t *testing.T) {
	m := servingDeployment()
	m.ServedModelName, m.ID, m.Endpoint, m.Status = types.StringUnknown(), types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
	m.Port = types.Int64Value(8001)
	planComputed(m, &vllmModel{})
	if m.ServedModelName.ValueString() != "m" || m.ID.ValueString() != "spark1:8001" ||
		m.Endpoint.ValueString() != "http://spark1:8001/v1" || m.Status.ValueString() != statusServing {
		t.Errorf("planned %v %v %v %v", m.ServedModelName, m.ID, m.Endpoint, m.Status)
	}
	m = servingDeployment()
	m.ServedModelName, m.ID = types.StringValue("chat"), types.StringUnknown()
	m.Head.SSHHost = types.StringUnknown()
	planComputed(m, &vllmModel{ServedModelName: types.StringValue("chat")})
	if m.ServedModelName.ValueString() != "chat" || !m.ID.IsUnknown() {
		t.Errorf("a given name is kept, an unknown head leaves the ID unknown: %v %v", m.ServedModelName, m.ID)
	}
	// Left out of the configuration, the state's name goes: the model's is served.
	m = servingDeployment()
	m.ServedModelName = types.StringValue("chat")
	planComputed(m, &vllmModel{ServedModelName: types.StringNull()})
	if m.ServedModelName.ValueString() != "m" {
		t.Errorf("served_model_name removed from the configuration is planned as %v, want the model's", m.ServedModelName)
	}
}

func TestPlacementUnknown(t *testing.T) {
	m := servingDeployment()
	m.HostIP, m.RayAddress = types.StringNull(), types.StringValue("10.0.0.1:6379")
	if placementUnknown(m) {
		t.Fatal("every value known, yet unknown")
	}
	for name, change := range map[string]func(*vllmModel){
		"ray_address":   func(m *vllmModel) { m.RayAddress = types.StringUnknown() },
		"head.ssh_host": func(m *vllmModel) { m.Head.SSHHost = types.StringUnknown() },
		"host_ip":       func(m *vllmModel) { m.HostIP = types.StringUnknown() },
		"model":         func(m *vllmModel) { m.Model = types.StringUnknown() },
		"tp":            func(m *vllmModel) { m.TP = types.Int64Unknown() },
		"pp":            func(m *vllmModel) { m.PP = types.Int64Unknown() },
		"env":           func(m *vllmModel) { m.Env = types.MapUnknown(types.StringType) },
	} {
		c := servingDeployment()
		c.HostIP, c.RayAddress = types.StringNull(), types.StringValue("10.0.0.1:6379")
		change(c)
		if !placementUnknown(c) {
			t.Errorf("%s unknown: the placement rules would run at plan", name)
		}
	}
}

func TestPlanUnknownPlacement(t *testing.T) {
	m := servingDeployment()
	planUnknownPlacement(m)
	if !m.PlacementIP.IsUnknown() || !m.VLLMVersion.IsUnknown() || !m.Executor.IsUnknown() || !m.PlacementPinned.IsUnknown() ||
		!m.ProcessIdentity.IsUnknown() {
		t.Errorf("planned %v %v %v %v %v", m.PlacementIP, m.VLLMVersion, m.Executor, m.PlacementPinned, m.ProcessIdentity)
	}
}

func TestKeepsServing(t *testing.T) {
	if keepsServing(nil, servingDeployment()) {
		t.Error("a create keeps a server serving")
	}
	if !keepsServing(servingDeployment(), servingDeployment()) {
		t.Error("an unchanged serving deployment restarts")
	}
	changed := servingDeployment()
	changed.Model = types.StringValue("other")
	if keepsServing(servingDeployment(), changed) {
		t.Error("a new model keeps the server")
	}
	stopped := servingDeployment()
	stopped.Status = types.StringValue("stopped")
	if keepsServing(stopped, servingDeployment()) {
		t.Error("a stopped server keeps serving")
	}
}

func TestKeepConcluded(t *testing.T) {
	plan, state := deploymentModel(), servingDeployment()
	keepConcluded(plan, state)
	if !plan.PlacementIP.Equal(state.PlacementIP) || !plan.VLLMVersion.Equal(state.VLLMVersion) || !plan.Executor.Equal(state.Executor) ||
		!plan.PlacementPinned.Equal(state.PlacementPinned) || !plan.ProcessIdentity.Equal(state.ProcessIdentity) {
		t.Errorf("planned %v %v %v %v %v", plan.PlacementIP, plan.VLLMVersion, plan.Executor, plan.PlacementPinned, plan.ProcessIdentity)
	}
}

func TestParseDeploymentImportID(t *testing.T) {
	for _, c := range []struct {
		id   string
		host string
		port int
	}{{"10.1.230.180:8000", "10.1.230.180", 8000}, {"[fd00::1]:8001", "fd00::1", 8001}, {"spark1:80", "spark1", 80}} {
		host, port, err := parseDeploymentImportID(c.id)
		if err != nil || host != c.host || port != c.port {
			t.Errorf("%q: %q %d %v, want %q %d", c.id, host, port, err, c.host, c.port)
		}
	}
	for _, id := range []string{"10.1.230.180", ":8000", "spark1:http", "", "fd00::1:8000"} {
		_, _, err := parseDeploymentImportID(id)
		want := `import ID "` + id + `": want <head ssh_host>:<port>, e.g. "10.1.230.180:8000"`
		if err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %q", id, err, want)
		}
	}
}

func TestImportedDeployment(t *testing.T) {
	var m vllmModel
	importedModel(t, NewVLLMDeployment(), importedDeployment("spark1:8000", "spark1", 8000), &m)
	if m.ID.ValueString() != "spark1:8000" || m.Head.SSHHost.ValueString() != "spark1" || m.Port.ValueInt64() != 8000 ||
		m.TP.ValueInt64() != 1 || m.PP.ValueInt64() != 1 || m.Host.ValueString() != "0.0.0.0" {
		t.Fatalf("imported %+v", m)
	}
	if !m.ProcessIdentity.IsNull() || !m.Model.IsNull() || !m.RayAddress.IsNull() || !m.Timeouts.IsNull() {
		t.Errorf("what Read fills in is not null: %v %v %v", m.ProcessIdentity, m.Model, m.RayAddress)
	}
	if e := m.Head.Endpoint(); e.Host != "spark1" || e.Port != 0 || e.User != "" {
		t.Errorf("the head is reached as %+v, want spark1 with the provider's port and user", e)
	}
}
