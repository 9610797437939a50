package resources

import "testing"

// The deployment names its cluster's container from ray_address's port, as
// the cluster does from gcs_port.
func TestGCSPortOf(t *testing.T) {
	for in, want := range map[string]int{"10.0.0.1:6380": 6380, "[fd00::1]:7000": 7000, "": 6379, "10.0.0.1": 6379} {
		if got := gcsPortOf(in); got != want {
			t.Errorf("gcsPortOf(%q) = %d, want %d", in, got, want)
		}
	}
}
