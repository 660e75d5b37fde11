// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <chrono>

// The bounded waits of start-up and shutdown, in one place. Shutdown is "cancel, then wait"
// (rpc::TaskGate::CancelAndWait): each owner closes its gate, cancels its tasks and waits for
// them at most its bound; when a bound runs out it logs what still runs and the shutdown goes
// on (docs/architecture.md, "Cancellation and shutdown"). A bound is longer than the deadline
// of anything a cancelled task may still finish, so that it runs out only on a bug or a store
// that hangs.
namespace nlockd::rpc {

// Added to an outbound call's deadline where a wait covers calls that may not stop at once
// (a name lookup on Asio's resolver thread cannot be cancelled).
inline constexpr std::chrono::seconds kShutdownMargin{1};

// An RPC listener's calls in flight when it shuts down (rpc::Server::Shutdown): a call may wait
// for a journal write, which a healthy store completes in well under this; past it the
// connections are closed and the replies lost (the clients retransmit to the next start).
inline constexpr std::chrono::seconds kRpcDrainBound{10};

// GraceController's watcher and store writes (clearing a stale lock table, settling a host's
// rows, marking the table complete): the watcher stops at once; a write is let finish, and a
// healthy store completes one in well under this.
inline constexpr std::chrono::seconds kGraceTasksBound{10};

// server::Core's own coroutines (the restart round waiting for rpcbind or its hold): they wait
// on events only, and a cancel ends them at once.
inline constexpr std::chrono::seconds kCoreTasksBound{1};

// Calls handed in by the host program (LockService::HandleCall) and still in progress: a call
// may wait for a journal write, which a healthy store completes in well under this.
inline constexpr std::chrono::seconds kHostCallsBound{10};

// Bounds that follow a setting are computed by their owners from their options: NlmService's
// (its callback deadlines), NsmService's (nsm.callback_timeout), each plus kShutdownMargin, and
// the notifier's (notify.timeout plus its shutdown_grace).

// How long the restart round, and readiness (READY=1), wait for rpcbind to hold our
// registrations: a peer that answers the notification at once (its reclaims, its SM_MON of
// us) should find us, but without rpcbind the registration keeps retrying for a minute, and
// neither may wait for that.
inline constexpr std::chrono::seconds kRegistrationWait{2};

}  // namespace nlockd::rpc
