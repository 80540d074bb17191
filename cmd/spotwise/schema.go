package main

import (
	"github.com/spf13/cobra"

	"github.com/spotwise/spotwise/api"
	"github.com/spotwise/spotwise/job"
)

func newSchemaCmd() *cobra.Command {
	var openapi bool
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Print the job spec's JSON Schema (or the API's OpenAPI document)",
		Long: `Print the JSON Schema (draft 2020-12) of a job spec, for editors: with the
YAML language server, a spec file whose first line is

  # yaml-language-server: $schema=./spotwise-job.schema.json

is completed and checked as you type. The schema is built from the spec
parser's own types and limits; names that depend on the server's catalog
(GPU types, providers, regions) are checked only on submission.

--openapi prints the server API's OpenAPI 3.1 document instead, the one a
running server serves at /v1/openapi.json.`,
		Example: "  spotwise schema > spotwise-job.schema.json\n  spotwise schema --openapi > spotwise-openapi.json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := job.Schema()
			if openapi {
				out = api.OpenAPI()
			}
			_, err := cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().BoolVar(&openapi, "openapi", false, "print the API's OpenAPI 3.1 document")
	return cmd
}
