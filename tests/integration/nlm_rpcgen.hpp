// SPDX-License-Identifier: Apache-2.0
#pragma once

// NLM calls through the stubs and XDR routines that rpcgen generated from the system's
// rpcsvc/nlm_prot.x (versions 1 and 3) and from tests/integration/rpcgen/nlm4_prot.x
// (version 4). The two generated headers cannot share a translation unit, so each version
// family lives in its own .cpp and this header speaks plain C++ types: what it adds is only
// filling the generated structs, never encoding a byte itself.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <netinet/in.h>
#include <rpc/rpc.h>

namespace nlockd::integration {

inline constexpr uint32_t kNlmProgram = 100021;

// Procedure numbers, the same in every version.
enum NlmProc : uint32_t {
  kNlmNull = 0,
  kNlmTest = 1,
  kNlmLock = 2,
  kNlmCancel = 3,
  kNlmUnlock = 4,
  kNlmGranted = 5,
  kNlmTestMsg = 6,
  kNlmLockMsg = 7,
  kNlmCancelMsg = 8,
  kNlmUnlockMsg = 9,
  kNlmGrantedMsg = 10,
  kNlmTestRes = 11,
  kNlmLockRes = 12,
  kNlmCancelRes = 13,
  kNlmUnlockRes = 14,
  kNlmGrantedRes = 15,
  kNlmShare = 20,
  kNlmUnshare = 21,
  kNlmNmLock = 22,
  kNlmFreeAll = 23,
};

// nlm_stats (v1/v3) and nlm4_stats (v4) agree on 0..4; v4 adds the rest.
enum class NlmStat : int32_t {
  kGranted = 0,
  kDenied = 1,
  kDeniedNolocks = 2,
  kBlocked = 3,
  kDeniedGracePeriod = 4,
  kDeadlck = 5,
  kRofs = 6,
  kStaleFh = 7,
  kFbig = 8,
  kFailed = 9,
};

std::string_view ToString(NlmStat stat);

// One lock as a client states it (nlm_lock / nlm4_lock). For versions 1 and 3 the offset and
// length must fit in 32 bits.
struct NlmLock {
  std::string caller_name;
  std::string fh;
  std::string oh;
  int32_t svid = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct NlmLockFlags {
  bool exclusive = true;
  bool block = false;
  bool reclaim = false;
  int32_t state = 1;  // The client's NSM state.
};

struct NlmHolder {
  bool exclusive = false;
  int32_t svid = 0;
  std::string oh;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct NlmReply {  // nlm_res / nlm4_res
  std::string cookie;
  NlmStat stat = NlmStat::kFailed;
};

struct NlmTestReply {  // nlm_testres / nlm4_testres
  std::string cookie;
  NlmStat stat = NlmStat::kFailed;
  std::optional<NlmHolder> holder;  // With kDenied.
};

struct NlmShare {  // nlm_share / nlm4_share; mode and access as fsh_mode / fsh_access.
  std::string caller_name;
  std::string fh;
  std::string oh;
  int32_t mode = 0;    // 0 deny none, 1 deny read, 2 deny write, 3 deny both.
  int32_t access = 0;  // 0 none, 1 read, 2 write, 3 both.
};

struct NlmShareReply {
  std::string cookie;
  NlmStat stat = NlmStat::kFailed;
  int32_t sequence = 0;
};

// The GRANTED / GRANTED_MSG argument (nlm_testargs / nlm4_testargs) as a callback receives it.
struct NlmGrantedArgs {
  std::string cookie;
  bool exclusive = false;
  NlmLock lock;
};

// One CLIENT* of libtirpc for one NLM version; every call goes through rpcgen's stub for that
// procedure and version. A failed call (timeout, RPC error) returns nullopt and keeps the
// error for error().
class NlmRpcgenClient {
 public:
  // Both return nullptr, with libtirpc's reason in CreateError(), when no CLIENT could be made.
  // To an explicit address and port, over TCP or UDP (no portmapper involved).
  static std::unique_ptr<NlmRpcgenClient> Connect(uint32_t version, bool tcp,
                                                  const sockaddr_in& server);
  // To `host`, the port asked of its rpcbind, as clnt_create does for a real client.
  static std::unique_ptr<NlmRpcgenClient> ConnectViaRpcbind(uint32_t version, bool tcp,
                                                            const std::string& host);

  static std::string CreateError();

  virtual ~NlmRpcgenClient() = default;

  virtual bool Null() = 0;
  virtual std::optional<NlmTestReply> Test(const NlmLock& lock, bool exclusive,
                                           const std::string& cookie) = 0;
  virtual std::optional<NlmReply> Lock(const NlmLock& lock, NlmLockFlags flags,
                                       const std::string& cookie) = 0;
  virtual std::optional<NlmReply> NmLock(const NlmLock& lock, NlmLockFlags flags,
                                         const std::string& cookie) = 0;
  virtual std::optional<NlmReply> Cancel(const NlmLock& lock, bool exclusive, bool block,
                                         const std::string& cookie) = 0;
  virtual std::optional<NlmReply> Unlock(const NlmLock& lock, const std::string& cookie) = 0;
  virtual std::optional<NlmShareReply> Share(const NlmShare& share, bool reclaim,
                                             const std::string& cookie) = 0;
  virtual std::optional<NlmShareReply> Unshare(const NlmShare& share,
                                               const std::string& cookie) = 0;
  virtual bool FreeAll(const std::string& name, int32_t state) = 0;
  // The callback's answer to a GRANTED_MSG, sent by a client's NLM to the server's.
  virtual bool GrantedRes(const NlmReply& res) = 0;
  // The _MSG forms: only the empty reply comes back here; the result goes to the client host's
  // NLM service as a _RES call.
  virtual bool TestMsg(const NlmLock& lock, bool exclusive, const std::string& cookie) = 0;
  virtual bool LockMsg(const NlmLock& lock, NlmLockFlags flags, const std::string& cookie) = 0;
  virtual bool CancelMsg(const NlmLock& lock, bool exclusive, bool block,
                         const std::string& cookie) = 0;
  virtual bool UnlockMsg(const NlmLock& lock, const std::string& cookie) = 0;

  // The libtirpc status of the last call (clnt_stat), and its text.
  int last_status() const { return last_status_; }
  const std::string& error() const { return error_; }

 protected:
  int last_status_ = 0;
  std::string error_;
};

// Argument and result bytes through rpcgen's XDR routines, for tests that build their own
// datagrams (retransmissions, _MSG calls, truncations). `version` picks nlm_prot.x (1, 3) or
// nlm4_prot.x (4).
std::vector<uint8_t> EncodeLockArgs(uint32_t version, const NlmLock& lock, NlmLockFlags flags,
                                    const std::string& cookie);
std::vector<uint8_t> EncodeTestArgs(uint32_t version, const NlmLock& lock, bool exclusive,
                                    const std::string& cookie);
std::vector<uint8_t> EncodeCancelArgs(uint32_t version, const NlmLock& lock, bool exclusive,
                                      bool block, const std::string& cookie);
std::vector<uint8_t> EncodeUnlockArgs(uint32_t version, const NlmLock& lock,
                                      const std::string& cookie);
std::vector<uint8_t> EncodeShareArgs(uint32_t version, const NlmShare& share, bool reclaim,
                                     const std::string& cookie);
std::optional<NlmReply> DecodeRes(uint32_t version, std::span<const uint8_t> bytes);
std::optional<NlmTestReply> DecodeTestRes(uint32_t version, std::span<const uint8_t> bytes);

// The serving side, for a callback server's dispatch function: the GRANTED / GRANTED_MSG
// argument of the call being served (svc_getargs), and an nlm_res / nlm4_res reply.
std::optional<NlmGrantedArgs> GetGrantedArgs(uint32_t version, SVCXPRT* transport);
bool ReplyRes(uint32_t version, SVCXPRT* transport, const NlmReply& res);
// The argument of a LOCK_RES, CANCEL_RES, UNLOCK_RES or GRANTED_RES call (nlm_res), and of a
// TEST_RES call (nlm_testres).
std::optional<NlmReply> GetResArgs(uint32_t version, SVCXPRT* transport);
std::optional<NlmTestReply> GetTestResArgs(uint32_t version, SVCXPRT* transport);

// Per-family implementations behind the functions above (nlm_rpcgen_v1.cpp serves versions 1
// and 3, nlm_rpcgen_v4.cpp version 4).
namespace detail {
std::unique_ptr<NlmRpcgenClient> MakeClientV1(CLIENT* client);
std::unique_ptr<NlmRpcgenClient> MakeClientV4(CLIENT* client);
std::optional<NlmGrantedArgs> GetGrantedArgsV1(SVCXPRT*);
std::optional<NlmGrantedArgs> GetGrantedArgsV4(SVCXPRT*);
bool ReplyResV1(SVCXPRT*, const NlmReply&);
bool ReplyResV4(SVCXPRT*, const NlmReply&);
std::optional<NlmReply> GetResArgsV1(SVCXPRT*);
std::optional<NlmReply> GetResArgsV4(SVCXPRT*);
std::optional<NlmTestReply> GetTestResArgsV1(SVCXPRT*);
std::optional<NlmTestReply> GetTestResArgsV4(SVCXPRT*);
std::vector<uint8_t> EncodeLockArgsV1(const NlmLock&, NlmLockFlags, const std::string&);
std::vector<uint8_t> EncodeLockArgsV4(const NlmLock&, NlmLockFlags, const std::string&);
std::vector<uint8_t> EncodeTestArgsV1(const NlmLock&, bool, const std::string&);
std::vector<uint8_t> EncodeTestArgsV4(const NlmLock&, bool, const std::string&);
std::vector<uint8_t> EncodeCancelArgsV1(const NlmLock&, bool, bool, const std::string&);
std::vector<uint8_t> EncodeCancelArgsV4(const NlmLock&, bool, bool, const std::string&);
std::vector<uint8_t> EncodeUnlockArgsV1(const NlmLock&, const std::string&);
std::vector<uint8_t> EncodeUnlockArgsV4(const NlmLock&, const std::string&);
std::vector<uint8_t> EncodeShareArgsV1(const NlmShare&, bool, const std::string&);
std::vector<uint8_t> EncodeShareArgsV4(const NlmShare&, bool, const std::string&);
std::optional<NlmReply> DecodeResV1(std::span<const uint8_t>);
std::optional<NlmReply> DecodeResV4(std::span<const uint8_t>);
std::optional<NlmTestReply> DecodeTestResV1(std::span<const uint8_t>);
std::optional<NlmTestReply> DecodeTestResV4(std::span<const uint8_t>);
}  // namespace detail

}  // namespace nlockd::integration
