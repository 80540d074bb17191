package azurefake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ErrNoAgent says a VM's custom data starts no agent: it is a silent node
// of a multi-node job.
var ErrNoAgent = errors.New("azurefake: the custom data starts no agent")

// ParseCustomData reads what a VM's custom data (Create.CustomData, the
// decoded script) would start: the agent's arguments (argv[0] is "agent",
// as given to the spotwise binary) and the workload JSON the script writes
// to workload.json, so a test can boot the VM by running
// `spotwise agent argv[1:]...`. The values are read by bash itself: the
// script's work_dir assignment, workload printf and args=(...) array are
// picked out with their quoting intact and evaluated, nothing else of the
// script runs (no directory is made, no file written). The --work-dir and
// --workload arguments name the script's work directory; a test running
// the agent points them at its own. It needs bash; a script of a node
// that starts no agent gives ErrNoAgent.
func ParseCustomData(script string) (argv []string, workloadJSON []byte, err error) {
	stmts, err := agentStatements(script)
	if err != nil {
		return nil, nil, err
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, nil, fmt.Errorf("azurefake: parsing custom data needs bash: %w", err)
	}
	prog := strings.Join([]string{"set -eu", stmts.workDir, stmts.workload, `printf '\0'`, stmts.args, `printf '%s\0' "${args[@]}"`}, "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "--noprofile", "--norc", "-c", prog)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("azurefake: evaluating the custom data's arguments: %w: %s", err, stderr.String())
	}
	workload, rest, ok := bytes.Cut(out, []byte{0})
	if !ok {
		return nil, nil, errors.New("azurefake: the custom data's arguments did not evaluate")
	}
	for _, a := range strings.SplitAfter(string(rest), "\x00") {
		if a != "" {
			argv = append(argv, strings.TrimSuffix(a, "\x00"))
		}
	}
	return argv, bytes.TrimSuffix(workload, []byte("\n")), nil
}

// statements are the parts of the script that say what the agent gets.
type statements struct{ workDir, workload, args string }

// agentStatements walks the script as bash reads it (quotes, comments,
// line starts) and picks out the statements that start with work_dir=,
// printf (up to its output redirection) and args=( (up to the closing
// parenthesis).
func agentStatements(script string) (statements, error) {
	var st statements
	for i := 0; i < len(script); {
		for i < len(script) && (script[i] == ' ' || script[i] == '\t') {
			i++
		}
		rest := script[i:]
		var err error
		end := i
		switch {
		case strings.HasPrefix(rest, "#"):
			if j := strings.IndexByte(rest, '\n'); j >= 0 {
				end = i + j
			} else {
				end = len(script)
			}
		case strings.HasPrefix(rest, "work_dir=") && st.workDir == "":
			end, err = scanTo(script, i, '\n')
			st.workDir = script[i:end]
		case strings.HasPrefix(rest, `printf '%s\n' `) && st.workload == "":
			end, err = scanTo(script, i, '>')
			st.workload = script[i:end]
		case strings.HasPrefix(rest, "args=(") && st.args == "":
			end, err = scanTo(script, i+len("args=("), ')')
			if err == nil {
				end++
				st.args = script[i:end]
			}
		}
		if err != nil {
			return statements{}, err
		}
		// On to the next line.
		if end, err = scanTo(script, end, '\n'); err != nil {
			return statements{}, err
		}
		i = end + 1
	}
	switch {
	case st.args == "":
		return statements{}, ErrNoAgent
	case st.workDir == "" || st.workload == "":
		return statements{}, errors.New("azurefake: the custom data sets no work_dir or writes no workload")
	}
	return st, nil
}

// scanTo returns the index of the first stop byte at or after i that bash
// would not read as quoted or escaped, or len(s) if there is none.
func scanTo(s string, i int, stop byte) (int, error) {
	for i < len(s) {
		switch c := s[i]; {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return 0, errors.New("azurefake: unterminated single quote in the custom data")
			}
			i += j + 2
		case c == '"':
			i++
			for i < len(s) && s[i] != '"' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return 0, errors.New("azurefake: unterminated double quote in the custom data")
			}
			i++
		case c == '\\':
			i += 2
		case c == stop:
			return i, nil
		default:
			i++
		}
	}
	return len(s), nil
}
