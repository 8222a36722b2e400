package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/weirproject/weir/agent"
	"github.com/weirproject/weir/agent/eventlog"
	"github.com/weirproject/weir/kafkasec"
	"github.com/weirproject/weir/pipeline"
)

// agentRootCmd is `weir agent`: tools for agent jobs.
func agentRootCmd() *cobra.Command {
	c := &cobra.Command{Use: "agent", Short: "Tools for agent jobs (the event log, replay evaluation)"}
	c.AddCommand(agentLogCmd(), agentReplayCmd())
	return c
}

// agentLogCmd is `weir agent log`: prints an agent's event log (package
// agent/eventlog) from a JSON-lines file or a Kafka topic.
func agentLogCmd() *cobra.Command {
	var file, topic, key, brokers, kafkaConfig string
	var sec kafkasec.Security
	var asJSON bool
	c := &cobra.Command{
		Use:   "log",
		Short: "Print an agent's event log from a JSON-lines file or a Kafka topic, optionally for one key",
		Long: `Prints the event log an agent job wrote (agent.Options.Listeners with package
agent/eventlog): every action's start, model and tool calls and their results, memory updates,
outputs, errors and replays, one line each, in the order written (per key: the order they
happened). --file reads a JSON-lines file; --topic reads a Kafka topic from its start to the end
offsets it has when the command starts (--brokers). --key keeps one key's entries.`,
		Args: noArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			k := &checks{c: cmd}
			sec = k.eventLogSource("file", file, topic, brokers, kafkaConfig)
			return k.err
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signalContext(cmd)
			defer stop()
			out := cmd.OutOrStdout()
			enc := json.NewEncoder(out)
			print := func(e agent.LogEntry) error {
				if asJSON {
					return enc.Encode(e)
				}
				_, err := fmt.Fprintln(out, e.String())
				return err
			}
			if file != "" {
				return eventlog.ReadFile(file, key, print)
			}
			return eventlog.ReadTopic(ctx, strings.Split(brokers, ","), sec, topic, key, print)
		},
	}
	f := c.Flags()
	f.StringVar(&file, "file", "", "JSON-lines log file (eventlog.CreateFile)")
	f.StringVar(&topic, "topic", "", "Kafka topic of the log (eventlog.NewKafkaWriter)")
	f.StringVar(&brokers, "brokers", "", "Kafka brokers of --topic, host:port[,host:port...]")
	f.StringVar(&kafkaConfig, "kafka-config", "", "YAML file with tls and sasl for --brokers (the keys of a pipeline's kafka section; docs/kafka.md \"Security\")")
	f.StringVar(&key, "key", "", "print only this key's entries (the key as the log prints it)")
	f.BoolVar(&asJSON, "json", false, "print each entry as a JSON line")
	return c
}

func errOrDir(err error) string {
	if err != nil {
		return err.Error()
	}
	return "a directory"
}

// inputTopicSource checks the flags of `weir agent replay --input-topic`
// without --topic: --brokers needed, --log optional.
func (k *checks) inputTopicSource(inputTopic, file, brokers, kafkaConfig string) kafkasec.Security {
	if brokers == "" {
		k.fail("--input-topic %q: give --brokers host:port[,host:port...]", inputTopic)
	}
	sec := k.brokers(brokers, kafkaConfig)
	k.eventLogFile("log", file)
	return sec
}

// eventLogSource checks the flags that name an agent's event log, shared
// by weir agent log and weir agent replay: a file (--<fileFlag>) or a
// Kafka topic (--topic, with --brokers and optionally --kafka-config),
// one of them; it returns the parsed security of --kafka-config.
func (k *checks) eventLogSource(fileFlag, file, topic, brokers, kafkaConfig string) kafkasec.Security {
	switch {
	case file == "" && topic == "":
		k.fail("give --%s FILE or --topic TOPIC (the agent's event log)", fileFlag)
	case file != "" && topic != "":
		k.fail("--%s and --topic: give one of them", fileFlag)
	case topic != "" && brokers == "":
		k.fail("--topic %q: give --brokers host:port[,host:port...]", topic)
	case topic == "" && brokers != "":
		k.fail("--brokers: only with --topic")
	}
	sec := k.brokers(brokers, kafkaConfig)
	k.eventLogFile(fileFlag, file)
	return sec
}

// brokers checks --brokers (host:port, comma-separated; empty: none) and
// returns the parsed security of --kafka-config.
func (k *checks) brokers(brokers, kafkaConfig string) kafkasec.Security {
	if brokers != "" {
		for _, b := range strings.Split(brokers, ",") {
			k.hostPort("brokers", b)
		}
	}
	var sec kafkasec.Security
	if kafkaConfig != "" {
		var err error
		if sec, err = pipeline.ParseSecurityFile(kafkaConfig); err != nil {
			k.fail("--kafka-config: %v", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	return sec
}

// eventLogFile checks that --<flag> (when given) is an event log file.
func (k *checks) eventLogFile(flag, file string) {
	if file == "" {
		return
	}
	if st, err := os.Stat(file); err != nil || st.IsDir() {
		k.fail("--%s %q: want an event log file written by an agent step's eventLog (%v)", flag, file, errOrDir(err))
	}
}
