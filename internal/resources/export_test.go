package resources

// DeploymentRestartRows are the configurable paths the attribute-change
// table says restart a deployment's server, for the simulated-node test in
// package resources_test that applies each change.
func DeploymentRestartRows() []string {
	var out []string
	for _, row := range deploymentChanges {
		if row.effect == restartsServer {
			out = append(out, row.path)
		}
	}
	return out
}
