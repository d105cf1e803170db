package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tendrilai/tendril/internal/channel/telegram"
)

func init() {
	register(newTelegramCmd)
	register(newPairingCmd)
}

func newTelegramCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "telegram",
		Short: "Manage the Telegram channel",
		Long: `Manage the Telegram channel (webhook at POST /telegram/webhook).

Needs TELEGRAM_BOT_TOKEN and TELEGRAM_WEBHOOK_SECRET (or telegram.botToken and
telegram.webhookSecret in tendril.json). TELEGRAM_API_URL selects the Bot API
server (default https://api.telegram.org).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTelegramSetWebhookCmd(g))
	return cmd
}

func newTelegramSetWebhookCmd(g *globals) *cobra.Command {
	var hookURL string
	var dropPending, asJSON bool
	cmd := &cobra.Command{
		Use:   "set-webhook --url URL",
		Short: "Register the webhook URL and secret with Telegram",
		Long: `Register URL with Telegram's setWebhook, together with the webhook secret, so
Telegram sends every update to it with the X-Telegram-Bot-Api-Secret-Token
header. URL is the public address of this server's /telegram/webhook, e.g.
https://bot.example.com/telegram/webhook. Telegram requires HTTPS.

Only message, edited_message, channel_post and callback_query updates are
requested. --drop-pending discards updates Telegram queued while no webhook
was set.`,
		Example: `  tendril telegram set-webhook --url https://bot.example.com/telegram/webhook`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if hookURL == "" {
				return usagef("--url is required")
			}
			u, err := url.Parse(hookURL)
			if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
				return usagef("--url %q is not an absolute http(s) URL", hookURL)
			}
			cfg, err := g.loadConfig()
			if err != nil {
				return err
			}
			if cfg.Telegram.BotToken == "" {
				return errors.New("TELEGRAM_BOT_TOKEN is not set")
			}
			if cfg.Telegram.WebhookSecret == "" {
				return telegram.ErrNoSecret
			}
			b, err := telegram.NewBot(cfg.Telegram.BotToken, cfg.Telegram.APIURL, nil)
			if err != nil {
				return err
			}
			if err := telegram.SetWebhook(cmd.Context(), b, hookURL, cfg.Telegram.WebhookSecret, dropPending); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(out).Encode(map[string]any{"ok": true, "url": hookURL, "drop_pending_updates": dropPending})
			}
			fmt.Fprintf(out, "Webhook set to %s (with secret token).\n", hookURL)
			return nil
		},
	}
	cmd.Flags().StringVar(&hookURL, "url", "", "public URL of /telegram/webhook (required)")
	cmd.Flags().BoolVar(&dropPending, "drop-pending", false, "drop updates Telegram queued before now")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newPairingCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pairing",
		Short: "List and approve Telegram pairing requests",
		Long: `Unknown Telegram users who write to the bot get an 8-character pairing code (valid for
1 hour; at most 3 wait at once). Approving a code lets that chat talk to Tendril.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var asJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List pending pairing codes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return call(g, c, asJSON, "GET", "/pairing", nil, nil, func(w io.Writer, list []telegram.Pairing) error {
				if len(list) == 0 {
					fmt.Fprintln(w, "No pending pairing requests.")
					return nil
				}
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "CODE\tCHAT\tUSER\tNAME\tEXPIRES")
				for _, p := range list {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", p.Code, p.ChatID, p.UserID, p.Name, time.Until(p.ExpiresAt).Round(time.Minute))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	approve := &cobra.Command{
		Use:     "approve CODE",
		Short:   "Approve a pairing code: its chat may talk to Tendril from now on",
		Example: "  tendril pairing approve K7QX3MZP",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			code := strings.ToUpper(strings.TrimSpace(args[0]))
			if len(code) != 8 {
				return usagef("pairing code %q must be 8 characters", args[0])
			}
			return call(g, c, asJSON, "POST", "/pairing/"+url.PathEscape(code)+"/approve", nil, struct{}{}, func(w io.Writer, p telegram.Pairing) error {
				_, err := fmt.Fprintf(w, "Approved %s: chat %d (%s) may now talk to Tendril.\n", p.Code, p.ChatID, p.Name)
				return err
			})
		},
	}
	approve.Flags().BoolVar(&asJSON, "json", false, "print the approved request as JSON")
	cmd.AddCommand(list, approve)
	return cmd
}
