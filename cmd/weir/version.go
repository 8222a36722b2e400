package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/internal/buildinfo"
)

// versionCmd is `weir version`: which weir this is (docs/deploy.md).
func versionCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "print weir's version, commit, Go version and build tags",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			i := buildinfo.Get()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(i)
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), i)
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}
