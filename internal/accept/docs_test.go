package accept

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The card docs/ACCEPTANCE.md shows is one ParseCard accepts, and the
// refusal it quotes is the one ParseCard gives for its load port renamed.
func TestTheDocumentedCardParses(t *testing.T) {
	b, err := os.ReadFile("../../docs/ACCEPTANCE.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(kind: AcceptanceCard\n.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/ACCEPTANCE.md shows no card")
	}
	card, err := ParseCard(m[1])
	if err != nil {
		t.Fatalf("the documented card: %v", err)
	}
	if len(card.Stages) != 4 || card.Stages[1].Load == nil || card.Brief.DataBoundary == nil {
		t.Errorf("the documented card parsed as %+v", card)
	}
	quoted := regexp.MustCompile("card.yaml: (acceptance card: line \\d+: stages\\[1\\]\\.load\\.port: .*)").FindSubmatch(b)
	if quoted == nil {
		t.Fatal("docs/ACCEPTANCE.md quotes no refusal")
	}
	_, err = ParseCard([]byte(strings.Replace(string(m[1]), "port: http\n", "port: grpc\n", 1)))
	if err == nil || err.Error() != string(quoted[1]) {
		t.Errorf("the card with port grpc: %v\nthe docs quote: %s", err, quoted[1])
	}
}
