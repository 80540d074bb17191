package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/spotwise/spotwise/job"
)

// outputFormats are the values of -o/--output: table for people, wide for
// people with a wide terminal (more columns where a command has more),
// json and yaml for scripts (the API's field names, in both).
var outputFormats = []string{"table", "wide", "json", "yaml"}

const outputUsage = "output format: table, wide, json or yaml"

// checkOutput refuses an unknown output format, naming the choices.
func checkOutput(format string) error {
	if !slices.Contains(outputFormats, format) {
		return fmt.Errorf("unknown output format %q (-o): choose one of %s", format, strings.Join(outputFormats, ", "))
	}
	return nil
}

// structured reports whether a format is for scripts (json, yaml).
func structured(format string) bool { return format == "json" || format == "yaml" }

// addOutputFlag registers -o/--output on cmd (with completion of its
// values); jsonAlias, when set, also registers the deprecated --json that
// some commands had, meaning -o json.
func addOutputFlag(cmd *cobra.Command, format *string, jsonAlias *bool) {
	cmd.Flags().StringVarP(format, "output", "o", "table", outputUsage)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	if jsonAlias != nil {
		cmd.Flags().BoolVar(jsonAlias, "json", false, "same as -o json")
		_ = cmd.Flags().MarkDeprecated("json", "use -o json")
	}
}

// outputOf is the format asked for: --json means json unless -o says
// otherwise; an unknown format is an error.
func outputOf(cmd *cobra.Command, format string, jsonAlias bool) (string, error) {
	if jsonAlias && !cmd.Flags().Changed("output") {
		format = "json"
	}
	return format, checkOutput(format)
}

// writeData writes v as JSON (indented) or YAML; the YAML is made from
// the JSON, so both have the same field names.
func writeData(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeRaw(w, format, b)
}

// writeRaw writes a JSON document as the format asks (json or yaml).
func writeRaw(w io.Writer, format string, data []byte) error {
	if format == "yaml" {
		y, err := yaml.JSONToYAML(data)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		data = append(data, '\n')
	}
	_, err := w.Write(data)
	return err
}

// colorOn reports whether w should get colour: it is a terminal and
// NO_COLOR (https://no-color.org) is not set. Files and pipes never do.
func colorOn(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// palette paints table cells when colour is on. Every cell of a painted
// column gets a code of the same length, so tabwriter's alignment holds.
type palette struct{ on bool }

func paletteFor(w io.Writer) palette { return palette{on: colorOn(w)} }

const (
	ansiReset   = "\x1b[0m"
	ansiDefault = "\x1b[39m"
	ansiRed     = "\x1b[31m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiBlue    = "\x1b[34m"
)

// paint wraps s in a colour code (ansiDefault for none).
func (p palette) paint(code, s string) string {
	if !p.on {
		return s
	}
	return code + s + ansiReset
}

// state paints a job state: green done, red failed or expired, yellow
// cancelled, blue on its way.
func (p palette) state(s job.State) string {
	code := ansiDefault
	switch s {
	case job.Succeeded:
		code = ansiGreen
	case job.Failed, job.Expired:
		code = ansiRed
	case job.Cancelled:
		code = ansiYellow
	case job.Running, job.Placing, job.Checkpointing, job.Migrating:
		code = ansiBlue
	}
	return p.paint(code, string(s))
}
