//go:build !linux

package sim

import (
	"errors"
	"time"
)

var errNotLinux = errors.New("sim: measurements read /proc and getrusage: Linux only")

// ResetPeakRSS is Linux only.
func ResetPeakRSS() error { return errNotLinux }

// PeakRSS is Linux only.
func PeakRSS() (int64, error) { return 0, errNotLinux }

// ProcessCPU is Linux only.
func ProcessCPU() (time.Duration, error) { return 0, errNotLinux }
