package mpdeploy

import (
	"strings"
	"testing"
)

// What FactsScript printed on a lab node (rank 0, Docker's /dev/shm),
// trimmed to the sections it reads.
const labNode = `@@hostname
spark1
@@interfaces
[{"ifname":"lo","mtu":65536,"operstate":"UNKNOWN","flags":["LOOPBACK","UP","LOWER_UP"],"addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},{"ifname":"eth1","mtu":1500,"operstate":"UP","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"addr_info":[{"family":"inet","local":"192.168.229.11","prefixlen":24}]}]
@@route
[]
@@gpus
none
@@read_from
python
@@python
3.11.2
@@ray
@@vllm
0.32.0+cpu
@@vllm_executor
@@vllm_env
@@peer_route=192.168.229.12
[{"dst":"192.168.229.12","dev":"eth1","prefsrc":"192.168.229.11","flags":[],"uid":1000,"cache":[]}]
@@peer_route=10.9.9.9
@@end
@@listening
LISTEN 0      4096   *:29501 *:*
LISTEN 0      2048   0.0.0.0:8000 0.0.0.0:* users:(("vllm",pid=210,fd=12))
LISTEN 0      4096   192.168.229.11:35683 0.0.0.0:* users:(("VLLM::Worker_TP",pid=251,fd=73))
@@shm
67108864
@@model
no such directory
@@model_config
@@model_weights
@@supervisor
systemd=yes
uid=1001
user=ops2
linger=no
@@unfinished
@@done
`

func TestParseFacts(t *testing.T) {
	seen, _, err := ParseFacts(labNode, []int{8000, 29501})
	if err != nil {
		t.Fatal(err)
	}
	if seen.Facts.VLLMVersion != "0.32.0+cpu" || len(seen.Facts.Interfaces) != 2 {
		t.Errorf("facts %+v", seen.Facts)
	}
	if !strings.Contains(seen.Listening[8000], `"vllm",pid=210`) || seen.Listening[29501] != "listening on *:29501" || len(seen.Listening) != 2 {
		t.Errorf("listening %v: want 8000 and 29501 only", seen.Listening)
	}
	if r := seen.Routes["192.168.229.12"]; r == nil || r.Dev != "eth1" || r.Gateway != "" {
		t.Errorf("route to the peer %+v", r)
	}
	if r, read := seen.Routes["10.9.9.9"]; !read || r != nil {
		t.Errorf("an address with no route reads as read and nil: %+v %v", r, read)
	}
	if seen.ShmFree != 64<<20 || seen.ModelMissing != "no such directory" {
		t.Errorf("shm %d, model %q", seen.ShmFree, seen.ModelMissing)
	}
	// A node with the model: its config.json and weight files.
	withModel := strings.Replace(labNode, "@@model\nno such directory\n@@model_config\n@@model_weights\n",
		"@@model\ndir\n@@model_config\n{\n \"num_hidden_layers\": 2\n}\n@@model_weights\n5588136\tmodel.safetensors\n", 1)
	seen, _, err = ParseFacts(withModel, nil)
	if err != nil || seen.ModelMissing != "" || string(seen.ModelConfig) != "{\n \"num_hidden_layers\": 2\n}" || seen.ModelWeights["model.safetensors"] != 5588136 {
		t.Errorf("model: %+v %v", seen, err)
	}
	if h := seen.Supervisor; !h.Read || !h.Systemd || h.Root || h.User != "ops2" || h.Linger {
		t.Errorf("supervisor %+v: want systemd, ops2, not lingering", h)
	}
	if _, _, err := ParseFacts("@@hostname\nx\n", nil); err == nil {
		t.Error("a cut-off output is an error")
	}
}
