// Command rogue plays a compromised map container for the least-privilege test: it holds
// what one map container holds (its own credentials, from its environment) and tries
// everything that map must not be able to do: mint tickets, act for another map towards
// the orchestrator, write another map's characters, reach another map's ports and
// control routes. It prints one JSON line per attempt and exits 0; the test judges.
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mapyard/mapyard/mapserver/kernel/httpkit"
	"github.com/mapyard/mapyard/mapserver/kernel/mapcontract"
	"github.com/mapyard/mapyard/mapserver/kernel/record"
	"github.com/mapyard/mapyard/orchestrator/ticket"
)

// Attempt is one line of the rogue's report.
type Attempt struct {
	Name      string `json:"name"`
	Reached   bool   `json:"reached"` // a connection was made
	Status    int    `json:"status,omitempty"`
	Code      string `json:"code,omitempty"`
	Transport string `json:"transport,omitempty"` // why nothing was reached
}

func main() {
	env := func(k string) string { return os.Getenv(k) }
	orch, cred, orchCred := env("MAP_ORCH_URL"), env("MAP_CREDENTIAL"), env("MAP_ORCH_CREDENTIAL")
	self, victim, victimAddr, char := env("ROGUE_SELF"), env("ROGUE_VICTIM"), env("ROGUE_VICTIM_ADDR"), env("ROGUE_CHARACTER")
	epoch, _ := strconv.ParseInt(env("ROGUE_EPOCH"), 10, 64)
	out := json.NewEncoder(os.Stdout)
	report := func(a Attempt) { _ = out.Encode(a) }
	hc := &http.Client{Timeout: 3 * time.Second}

	// The best key a map can derive is from what it holds: its own credential.
	forge := func(to string) string {
		m := hmac.New(sha256.New, []byte(cred))
		m.Write([]byte("mapyard ticket signing v1"))
		now := time.Now()
		tok, _ := ticket.NewSigner(m.Sum(nil)).Mint(ticket.Claims{Kind: ticket.KindJoin, ID: "forged", Subject: "~forged",
			CharacterID: char, From: "-", To: to, IssuedAtMs: now.UnixMilli(), ExpiresAtMs: now.Add(time.Minute).UnixMilli(), Nonce: "forged-nonce"})
		return tok
	}
	call := func(name, method, url, credential string, body any) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, url, rd)
		req.Header.Set(httpkit.SecretHeader, credential)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			report(Attempt{Name: name, Transport: err.Error()})
			return
		}
		defer resp.Body.Close()
		var e httpkit.ErrorResponse
		buf, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(buf, &e)
		report(Attempt{Name: name, Reached: true, Status: resp.StatusCode, Code: e.Error.Code})
	}

	call("redeem-forged-ticket", http.MethodPost, orch+mapcontract.PathRedeem, cred, mapcontract.RedeemRequest{InstanceID: self, Token: forge(self)})
	call("register-as-victim", http.MethodPost, orch+mapcontract.PathMapReady, cred, mapcontract.MapReady{InstanceID: victim, MapID: "default", GamePort: 7000, ControlPort: 9100})
	call("heartbeat-as-victim", http.MethodPost, orch+mapcontract.PathMapHeartbeat, cred, mapcontract.Heartbeat{InstanceID: victim})
	call("redeem-for-victim", http.MethodPost, orch+mapcontract.PathRedeem, cred, mapcontract.RedeemRequest{InstanceID: victim, Token: forge(victim)})
	snap := mapcontract.PersistSnapshot{InstanceID: self, Partition: record.CharacterPartition(char), Revision: 1 << 40, Epoch: epoch,
		Envelope: record.NewSnapshotEnvelope("rogue", 1, time.Now().UnixMilli(), json.RawMessage(`{"mapId":"default","x":0,"y":0}`))}
	call("snapshot-of-victims-character", http.MethodPost, orch+mapcontract.PathPersistSnapshot, cred, snap)
	snap.InstanceID = victim
	call("snapshot-as-victim", http.MethodPost, orch+mapcontract.PathPersistSnapshot, cred, snap)
	grant := record.CriticalEvent{EventID: "rogue-pickup", InstanceID: self, Kind: "item_pickup",
		Payload: json.RawMessage(`{"itemId":"rogue-gold","templateId":"coin","quantity":1000,"from":{"instanceId":"` + self +
			`","x":1,"y":1},"to":{"characterId":"` + char + `"}}`),
		Epochs: map[string]int64{char: epoch}}
	call("critical-event-for-victims-character", http.MethodPost, orch+mapcontract.PathPersistCritical, cred, grant)
	call("transfer-victims-player", http.MethodPost, orch+mapcontract.PathRequestTransfer, cred, mapcontract.TransferRequest{
		TransferID: "rogue-tr-1", CharacterID: char, FromInstanceID: self, ToInstanceID: self + "-x", Epoch: epoch})
	call("transfer-victims-player-as-victim", http.MethodPost, orch+mapcontract.PathRequestTransfer, cred, mapcontract.TransferRequest{
		TransferID: "rogue-tr-2", CharacterID: char, FromInstanceID: victim, ToInstanceID: self, Epoch: epoch})

	// The victim's container on the map network, directly.
	for _, port := range []string{"7000", "9100", "22", "80", "8080"} {
		a := Attempt{Name: "connect-victim-" + port}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(victimAddr, port))
		cancel()
		if err == nil {
			a.Reached = true
			c.Close()
		} else {
			a.Transport = err.Error()
		}
		report(a)
	}
	victimControl := fmt.Sprintf("http://%s", net.JoinHostPort(victimAddr, "9100"))
	call("victim-health-with-own-orchestrator-credential", http.MethodGet, victimControl+"/health", orchCred, nil)
	call("victim-start-with-own-orchestrator-credential", http.MethodPost, victimControl+"/control/start-instance", orchCred, map[string]string{"instanceId": self, "mapId": "default"})
}
