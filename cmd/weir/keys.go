package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/keygroup"
)

func keysCmd() *cobra.Command {
	var maxP, par int
	var typ string
	c := &cobra.Command{
		Use:   "keys KEY...",
		Short: "Print the key group and subtask of each key (Flink-compatible), one JSON object per line",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef(cmd, "no keys: give one or more keys to place")
			}
			return nil
		},
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			k.intRange("parallelism", int64(par), 1, keygroup.UpperBound)
			if maxP != 0 {
				k.intRange("max-parallelism", int64(maxP), 1, keygroup.UpperBound)
				if k.err == nil && par > maxP {
					k.fail("--parallelism %d: want at most --max-parallelism %d", par, maxP)
				}
			}
			k.oneOf("type", typ, "string", "int", "long", "bool")
			return k.err
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return printKeys(cmd.OutOrStdout(), maxP, par, typ, args)
		},
	}
	c.Flags().IntVar(&maxP, "max-parallelism", 0, "number of key groups (0: Flink's default for --parallelism)")
	c.Flags().IntVar(&par, "parallelism", 1, "number of subtasks")
	c.Flags().StringVar(&typ, "type", "string", "key type: string, int (Java int), long or bool")
	return c
}

type keyLine struct {
	Key      string `json:"key"`
	KeyGroup int    `json:"keyGroup"`
	Subtask  int    `json:"subtask"`
}

func printKeys(w io.Writer, maxP, par int, typ string, keys []string) error {
	if maxP == 0 {
		if par < 1 {
			return fmt.Errorf("--parallelism must be at least 1")
		}
		maxP = keygroup.DefaultMaxParallelism(par)
	}
	if err := keygroup.Validate(maxP, par); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for _, k := range keys {
		var h int32
		switch typ {
		case "string":
			h = keygroup.HashString(k)
		case "int":
			v, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return fmt.Errorf("key %q is not an int (32-bit): %w", k, err)
			}
			h = keygroup.HashInt32(int32(v))
		case "long":
			v, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				return fmt.Errorf("key %q is not a long (64-bit): %w", k, err)
			}
			h = keygroup.HashInt64(v)
		case "bool":
			v, err := strconv.ParseBool(k)
			if err != nil {
				return fmt.Errorf("key %q is not a bool: %w", k, err)
			}
			h = keygroup.HashBool(v)
		default:
			return fmt.Errorf("unknown --type %q: use string, int, long or bool", typ)
		}
		kg := keygroup.Assign(h, maxP)
		if err := enc.Encode(keyLine{Key: k, KeyGroup: kg, Subtask: keygroup.OperatorIndex(kg, maxP, par)}); err != nil {
			return err
		}
	}
	return nil
}
