package portal_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gpufleet/gpufleet/api"
	"github.com/gpufleet/gpufleet/internal/testwait"
)

// openSeen is what the workload page shows of its Open links.
type openSeen struct {
	Text   string `json:"text"`
	Href   string `json:"href"`
	Target string `json:"target"`
	Rel    string `json:"rel"`
}

const openJS = `[...document.querySelectorAll('#open a.open-link')].map(a => ({text: a.textContent, href: a.href, target: a.target, rel: a.rel}))`

// A running notebook's page has an Open link to the proxy with the
// signed-in token, for a new tab without opener or referrer; followed, it
// shows what the notebook serves (python's directory listing), and the
// token is gone from the address. A workload without ports has no link.
func TestOpenButtonInBrowser(t *testing.T) {
	chrome := findChromium(t)
	s := startServer(t)
	b := startBrowser(t, chrome)
	ctx := context.Background()

	nb, err := s.admin.SubmitWorkload(ctx, &api.Workload{Name: "files", Kind: api.KindNotebook, Resources: api.Resources{GPUs: 250},
		Command: []string{"sh", "-c", `exec /usr/bin/python3 -m http.server "$PORT"`}}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.CancelWorkload(context.Background(), nb.ID) })
	job, err := s.admin.SubmitWorkload(ctx, &api.Workload{Name: "portless", Resources: api.Resources{GPUs: 250}, Command: []string{"sleep", "120"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.admin.CancelWorkload(context.Background(), job.ID) })

	b.run(t, "sign in and open the notebook's page",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#dashboard")),
		chromedp.Navigate(s.url+"/#/workloads/"+nb.ID),
		waitJS(`document.querySelector('#open a.open-link') !== null`))
	want := openSeen{Text: "Open", Href: s.url + "/w/" + nb.ID + "/8888/?gpufleet-token=" + url.QueryEscape(s.token), Target: "_blank", Rel: "noopener noreferrer"}
	links := get(t, b, "the Open links", chromedp.Evaluate[[]openSeen](openJS))
	if len(links) != 1 || links[0] != want {
		t.Fatalf("the Open links: %+v, want [%+v]", links, want)
	}

	// What the link opens: the notebook's own page, once it answers.
	testwait.Until(t, 20*time.Second, "the notebook to answer through the proxy", func() (bool, string) {
		req, _ := http.NewRequest("GET", s.url+"/w/"+nb.ID+"/8888/", nil)
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	b.run(t, "follow the link in this tab",
		chromedp.Navigate(links[0].Href),
		waitJS(`document.body !== null && document.body.innerText.includes('Directory listing')`))
	if loc := get(t, b, "the address", chromedp.Evaluate[string](`location.href`)); strings.Contains(loc, "gpufleet-token") || loc != s.url+"/w/"+nb.ID+"/8888/" {
		t.Errorf("the address after the exchange is %q, want %s/w/%s/8888/ without the token", loc, s.url, nb.ID)
	}

	b.run(t, "a workload without ports has no Open link",
		chromedp.Navigate(s.url+"/#/workloads/"+job.ID),
		waitJS(`document.querySelector('#phase') !== null && document.querySelector('#phase').textContent.includes('Running')`))
	if links := get(t, b, "the Open links", chromedp.Evaluate[[]openSeen](openJS)); len(links) != 0 {
		t.Errorf("a workload without ports shows Open links: %+v", links)
	}

	b.mu.Lock()
	for _, p := range b.problems {
		t.Errorf("in the page: %s", p)
	}
	b.mu.Unlock()
}
