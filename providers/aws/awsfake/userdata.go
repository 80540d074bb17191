package awsfake

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Markers of the boot script the AWS provider writes.
const (
	argsStart     = "\nargs=(\n"
	argsEnd       = "\n)\n"
	workloadStart = "<<'SPOTWISE_WORKLOAD'\n"
	workloadEnd   = "\nSPOTWISE_WORKLOAD\n"
)

// ParseUserData reads a launch's boot script (Launch.UserData) the way the
// instance would run it: the agent's argument vector, from running the
// script's args=( ... ) block in bash with $instance set to instanceID (so
// every quote is undone exactly as on the instance), and the workload JSON
// the script writes, decoded from its base64 heredoc. It needs bash on the
// PATH; nothing but the args block and a printf is run.
func ParseUserData(script, instanceID string) (argv []string, workload []byte, err error) {
	i := strings.Index(script, argsStart)
	if i < 0 {
		return nil, nil, errors.New("awsfake: the user data has no args=( ... ) block")
	}
	block, _, ok := strings.Cut(script[i+1:], argsEnd)
	if !ok {
		return nil, nil, errors.New("awsfake: the user data's args block does not end")
	}
	prog := "instance=" + shellQuote(instanceID) + "\n" + block + argsEnd + `printf '%s\0' "${args[@]}"` + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", prog)
	cmd.Env = []string{}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("awsfake: running the args block: %w: %s", err, stderr.String())
	}
	argv = strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")

	_, rest, ok := strings.Cut(script, workloadStart)
	body, _, ok2 := strings.Cut(rest, workloadEnd)
	if !ok || !ok2 {
		return nil, nil, errors.New("awsfake: the user data has no workload heredoc")
	}
	workload, err = base64.StdEncoding.DecodeString(strings.ReplaceAll(body, "\n", ""))
	if err != nil {
		return nil, nil, fmt.Errorf("awsfake: decoding the workload: %w", err)
	}
	return argv, workload, nil
}

// shellQuote single-quotes s for bash.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
