package cli

import (
	"strings"
	"testing"
)

// TestQuotaChecksAreTheServers checks that the CLI refuses, before sending
// anything, what the server's quota check (spec.CheckQuota) refuses,
// model guarantees included, naming the flag or the file's key.
func TestQuotaChecksAreTheServers(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{"model guarantees above --guaranteed", []string{"set", "quota", "research", "--guaranteed", "4", "--guaranteed-model", "H100=4", "--guaranteed-model", "A10=2.5"}, "", 2,
			`--guaranteed-model "H100=4,A10=2.5": the model guarantees add up to 6.5 GPUs, more than the team's guarantee of 4`},
		{"model guarantees above --guaranteed at creation", []string{"create", "team", "nlp", "--guaranteed", "1", "--guaranteed-model", "H100=2"}, "", 2,
			`--guaranteed-model "H100=2": the model guarantees add up to 2 GPUs, more than the team's guarantee of 1`},
		{"pool guarantees above --guaranteed", []string{"set", "quota", "research", "--guaranteed", "4", "--guaranteed-pool", "onprem=4", "--guaranteed-pool", "cloud=1"}, "", 2,
			`--guaranteed-pool "onprem=4,cloud=1": the pool guarantees add up to 5 GPUs, more than the team's guarantee of 4`},
		{"a pool guarantee that is no number", []string{"set", "quota", "research", "--guaranteed-pool", "onprem=lots"}, "", 2,
			`--guaranteed-pool "onprem=lots": want a number of GPUs`},
		{"apply: pool guarantees above the guarantee", []string{"apply", "-f", "-"},
			"teams:\n  - name: vision\n    guaranteed: 2\n    guaranteedByPool: {onprem: 3}\n", 1,
			"teams[0].guaranteedByPool: the pool guarantees add up to 3 GPUs, more than the team's guarantee of 2"},
		{"apply: a negative pool guarantee", []string{"apply", "-f", "-"},
			"teams:\n  - name: vision\n    guaranteed: 2\n    guaranteedByPool: {onprem: -1}\n", 1,
			"teams[0].guaranteedByPool.onprem: must be from 0 to a million GPUs"},
		{"a guarantee above a million GPUs", []string{"create", "team", "nlp", "--guaranteed", "1000001"}, "", 2,
			`--guaranteed "1000001": must be at most a million GPUs`},
		{"a limit above a million GPUs", []string{"set", "quota", "research", "--limit", "1000001"}, "", 2,
			`--limit "1000001": must be unlimited (-1) or at most a million GPUs`},
		{"apply: model guarantees above the guarantee", []string{"apply", "-f", "-"},
			"teams:\n  - name: vision\n    guaranteed: 2\n    guaranteedByModel: {H100: 3}\n", 1,
			"teams[0].guaranteedByModel: the model guarantees add up to 3 GPUs, more than the team's guarantee of 2"},
		{"apply: model guarantees without a guarantee are above 0", []string{"apply", "-f", "-"},
			"teams:\n  - name: vision\n    guaranteedByModel: {H100: 1}\n", 1,
			"teams[0].guaranteedByModel: the model guarantees add up to 1 GPUs, more than the team's guarantee of 0"},
		{"apply: a negative model guarantee", []string{"apply", "-f", "-"},
			"teams:\n  - name: vision\n    guaranteed: 2\n    guaranteedByModel: {H100: -1}\n", 1,
			"teams[0].guaranteedByModel.H100: must be from 0 to a million GPUs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runCLI(t, invocation{args: tt.args, stdin: tt.stdin})
			if got.code != tt.code || !strings.Contains(got.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", got.code, got.stderr, tt.code, tt.want)
			}
		})
	}
}
