package raycluster

import (
	"strings"
	"testing"
	"time"
)

func TestWorkerNamesAreSorted(t *testing.T) {
	s := Spec{Workers: map[string]NodeSpec{"spark3": {}, "spark2": {}, "a": {}}}
	if got := strings.Join(s.WorkerNames(), ","); got != "a,spark2,spark3" {
		t.Fatalf("names = %s", got)
	}
}

func TestRegistrationErrorSaysWhatToDo(t *testing.T) {
	e := &RegistrationError{Node: "spark2", Want: "192.168.200.13", Got: []string{"10.1.230.181"}}
	for _, want := range []string{"spark2", "10.1.230.181", "192.168.200.13", "node_ip"} {
		if !strings.Contains(e.Error(), want) {
			t.Errorf("%q lacks %q", e.Error(), want)
		}
	}
	e = &RegistrationError{Node: "head", Want: "10.1.230.180", Waited: 90 * time.Second}
	if !strings.Contains(e.Error(), "within 1m30s") {
		t.Errorf("timeout message: %q", e.Error())
	}
}

func TestHolderNamesThisProcess(t *testing.T) {
	h := Holder()
	if !strings.Contains(h, "terraform-provider-spark pid ") || !strings.Contains(h, " since ") {
		t.Fatalf("holder = %q", h)
	}
}
