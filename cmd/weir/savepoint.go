package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/checkpoint"
)

func savepointCmd() *cobra.Command {
	c := &cobra.Command{Use: "savepoint", Short: "Work with savepoints and checkpoints", Args: noArgs}
	var asJSON bool
	inspect := &cobra.Command{
		Use:   "inspect DIR|URL",
		Short: "Print the operators, uids, key-group ranges and sizes of a savepoint or checkpoint (a directory, or a file://, s3://, gs:// or azblob:// URL)",
		Args:  exactArgs(1, "one savepoint or checkpoint directory or URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkpoint.CheckLocation(args[0]); err != nil {
				return usagef(cmd, "%s", strings.TrimPrefix(err.Error(), "checkpoint: "))
			}
			return inspectSnapshot(cmd.OutOrStdout(), args[0], asJSON)
		},
	}
	inspect.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.AddCommand(inspect)
	return c
}

type subtaskInfo struct {
	Subtask   int    `json:"subtask"`
	KeyGroups string `json:"keyGroups,omitempty"`
	Groups    int    `json:"keyGroupsWithState"`
	Lists     int    `json:"listItems"`
	Bytes     int64  `json:"bytes"`
	// Native describes native keyed state (incremental Pebble checkpoints).
	Native *nativeInfo `json:"native,omitempty"`
}

type nativeInfo struct {
	Format       string `json:"format"`
	KeyGroups    string `json:"keyGroups"`
	SharedFiles  int    `json:"sharedFiles"`
	PrivateFiles int    `json:"privateFiles"`
	Bytes        int64  `json:"bytes"`
}

type operatorInfo struct {
	UID         string        `json:"uid"`
	Name        string        `json:"name"`
	Parallelism int           `json:"parallelism"`
	Bytes       int64         `json:"bytes"`
	Subtasks    []subtaskInfo `json:"subtasks"`
}

type snapshotInfo struct {
	ID             int64          `json:"id"`
	Kind           string         `json:"kind"`
	FormatVersion  int            `json:"formatVersion"`
	Job            string         `json:"job,omitempty"`
	MaxParallelism int            `json:"maxParallelism"`
	Bytes          int64          `json:"bytes"`
	Operators      []operatorInfo `json:"operators"`
}

func inspectSnapshot(w io.Writer, dir string, asJSON bool) error {
	s, err := checkpoint.Read(dir)
	if err != nil {
		return err
	}
	info := snapshotInfo{ID: s.ID, Kind: string(s.Kind), FormatVersion: s.Version, Job: s.Job, MaxParallelism: s.MaxParallelism, Bytes: s.Size()}
	for _, o := range s.Operators {
		oi := operatorInfo{UID: o.UID, Name: o.Name, Parallelism: o.Parallelism, Bytes: o.Size()}
		for i, st := range o.Subtasks {
			si := subtaskInfo{Subtask: i}
			if st != nil {
				var kgs []int
				for kg, b := range st.KeyGroups {
					kgs = append(kgs, kg)
					si.Bytes += b.Len()
				}
				sort.Ints(kgs)
				si.Groups = len(kgs)
				if len(kgs) > 0 {
					si.KeyGroups = fmt.Sprintf("[%d,%d]", kgs[0], kgs[len(kgs)-1])
				}
				for _, l := range st.Lists {
					si.Lists += len(l.Items)
					for _, b := range l.Items {
						si.Bytes += b.Len()
					}
				}
				if n := st.Native; n != nil {
					si.Native = &nativeInfo{Format: n.Format, KeyGroups: fmt.Sprintf("[%d,%d]", n.Start, n.End),
						SharedFiles: len(n.Shared), PrivateFiles: len(n.Private), Bytes: n.Size()}
					si.Bytes += n.Size()
				}
			}
			oi.Subtasks = append(oi.Subtasks, si)
		}
		info.Operators = append(info.Operators, oi)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	job := ""
	if info.Job != "" {
		job = "  job " + info.Job
	}
	fmt.Fprintf(w, "%s %d  format version %d (this weir reads 1 to %d)%s  max parallelism %d  %d bytes\n",
		info.Kind, info.ID, info.FormatVersion, checkpoint.FormatVersion, job, info.MaxParallelism, info.Bytes)
	for _, o := range info.Operators {
		fmt.Fprintf(w, "operator %-24s uid %-24s parallelism %d  %d bytes\n", o.Name, o.UID, o.Parallelism, o.Bytes)
		for _, st := range o.Subtasks {
			if st.Bytes == 0 {
				continue
			}
			fmt.Fprintf(w, "  subtask %d  key groups %-10s (%d with state)  list items %d  %d bytes\n", st.Subtask, st.KeyGroups, st.Groups, st.Lists, st.Bytes)
			if n := st.Native; n != nil {
				fmt.Fprintf(w, "    native %s  key groups %s  %d shared + %d private files  %d bytes\n",
					n.Format, n.KeyGroups, n.SharedFiles, n.PrivateFiles, n.Bytes)
			}
		}
	}
	return nil
}
