package modelcopy

import "sync"

// Planned is what the spark_model plans of this provider process put on
// nodes: a directory on a node (by its SSH address) and the files, by name
// and size, it holds once the apply ran. A deployment planned in the same
// run (after the model, as it names it) checks its weights rule (D20)
// against this instead of the node, which may not hold them yet.
type Planned struct {
	mu   sync.Mutex
	dirs map[plannedDir]map[string]int64
}

type plannedDir struct{ host, dir string }

// Put records that dir on the node reached at host will hold files.
func (p *Planned) Put(host, dir string, files map[string]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirs == nil {
		p.dirs = map[plannedDir]map[string]int64{}
	}
	p.dirs[plannedDir{host, dir}] = files
}

// Get is what a model plan put in dir on host; ok false when none did.
func (p *Planned) Get(host, dir string) (files map[string]int64, ok bool) {
	if p == nil {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	files, ok = p.dirs[plannedDir{host, dir}]
	return files, ok
}
