package lab

import "syscall"

// detached puts dockerd in its own session so it outlives `make lab-up`.
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
