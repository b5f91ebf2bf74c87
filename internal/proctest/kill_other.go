//go:build !unix

package proctest

import "os/exec"

func kill(cmd *exec.Cmd) { cmd.Process.Kill() }
