package sim

import (
	"math/rand/v2"
)

// Fatal broker errors in the clustered form: in a third of the clustered
// seeds, drawn from a stream of their own (rand.NewPCG(seed, 0xc1fa))
// after every other draw of the form, so that its kills, joins, retriable
// errors, latency spikes and static members keep theirs: one
// non-retriable error on the members' data path, answered once to the
// At-th request of its kind of the run (over every member): a fetch or a
// list-offsets with TOPIC_AUTHORIZATION_FAILED, a produce with
// INVALID_TXN_STATE or TOPIC_AUTHORIZATION_FAILED, an InitProducerId with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, an AddPartitionsToTxn with
// INVALID_TXN_STATE, an EndTxn with PRODUCER_FENCED, INVALID_TXN_STATE or
// UNKNOWN_SERVER_ERROR (kafkaRequests' fatal errors, as the Kafka form
// draws them).
//
// What is correct (doc.go, the clustered form): the task whose request
// it strikes fails, and its member starts it again from its latest
// checkpoint after RestartDelay (cluster M4, C3: the restore commits what
// that checkpoint pre-committed and aborts the rest); a member whose Run
// returns an error after a fatal error struck is started again by the
// harness under the same Config, as an operator (Kubernetes) restarts a
// process that exited, at most maxMemberRestarts times per broker fault
// struck. S16 must hold and the run must finish. A member whose Run
// returns an error with no fatal error struck still fails S4.
func generateClusterFatal(seed uint64) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0xc1fa))
	if rng.IntN(3) != 0 {
		return nil
	}
	r := kafkaRequests[rng.IntN(len(kafkaRequests))]
	return []Fault{{Kind: FaultBrokerFatal, Request: r.key.Name(), Err: r.fatal[rng.IntN(len(r.fatal))].Message,
		// The run's requests of a kind are over every task of every
		// member: about three times an attempt's of the Kafka form.
		At: 1 + rng.Int64N(3*requestSpread(r.key))}}
}

// maxMemberRestarts bounds how often the harness restarts members whose
// Run returned an error, per fatal broker error or broker restart struck:
// one of them can end every member at once (a broker down while members
// start), and a run has up to three members (seed 1719066: two broker
// restarts ended three members' Runs, and a budget of 3 for the run
// failed it).
const maxMemberRestarts = 3

// brokerFaultsStruck counts the fatal broker errors and broker restarts
// (brokerrestart.go, restartStruck) of the form that have struck.
func (cr *clusterRun) brokerFaultsStruck() int {
	n := 0
	for _, a := range cr.armed {
		if (a.f.Kind == FaultBrokerFatal || a.f.Kind == FaultBrokerRestart) && a.struck.Load() {
			n++
		}
	}
	return n
}
