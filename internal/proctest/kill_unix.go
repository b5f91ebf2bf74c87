//go:build unix

package proctest

import (
	"os/exec"
	"syscall"
)

func kill(cmd *exec.Cmd) {
	if a := cmd.SysProcAttr; a != nil && a.Setpgid {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return
	}
	cmd.Process.Kill()
}
