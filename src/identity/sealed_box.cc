// AES-256-GCM through OpenSSL's EVP: a 12-byte random nonce, the purpose as associated data,
// a 16-byte tag; the whole in base64url without padding.
#include "identity/sealed_box.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <memory>

#include "core/encoding.h"

namespace gantry {

namespace {

constexpr int kNonceBytes = 12;
constexpr int kTagBytes = 16;
constexpr size_t kMaxSealed = 8192;  // a cookie; anything longer is not ours

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

std::string ToUrlSafe(std::string text) {
  for (char& c : text) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!text.empty() && text.back() == '=') text.pop_back();
  return text;
}

bool FromUrlSafe(std::string text, std::string* bytes) {
  for (char& c : text) {
    if (c == '+' || c == '/' || c == '=') return false;
    c = c == '-' ? '+' : c == '_' ? '/' : c;
  }
  while (text.size() % 4 != 0) text += '=';
  return Base64Decode(text, bytes);
}

const unsigned char* Bytes(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

SealedBox::SealedBox() {
  if (RAND_bytes(key_, sizeof(key_)) != 1) std::abort();  // no entropy: never seal under a weak key
}

std::string SealedBox::Seal(const std::string& plain, const std::string& purpose) const {
  std::string out(kNonceBytes + plain.size() + kTagBytes, '\0');
  auto* nonce = reinterpret_cast<unsigned char*>(out.data());
  if (RAND_bytes(nonce, kNonceBytes) != 1) std::abort();
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_, nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, Bytes(purpose), static_cast<int>(purpose.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nonce + kNonceBytes, &len, Bytes(plain), static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), nonce + kNonceBytes + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, nonce + kNonceBytes + plain.size()) != 1) {
    std::abort();  // the cipher itself failed: nothing sealed may go out unsealed
  }
  return ToUrlSafe(Base64Encode(out));
}

std::optional<std::string> SealedBox::Open(const std::string& sealed, const std::string& purpose) const {
  std::string bytes;
  if (sealed.size() > kMaxSealed || !FromUrlSafe(sealed, &bytes)) return std::nullopt;
  // One spelling only: the last character's unused bits must be zero, as Seal writes them.
  if (ToUrlSafe(Base64Encode(bytes)) != sealed) return std::nullopt;
  if (bytes.size() < static_cast<size_t>(kNonceBytes + kTagBytes)) return std::nullopt;
  const size_t text_bytes = bytes.size() - kNonceBytes - kTagBytes;
  const unsigned char* nonce = Bytes(bytes);
  std::string plain(text_bytes, '\0');
  auto* out = reinterpret_cast<unsigned char*>(plain.data());
  std::string tag = bytes.substr(kNonceBytes + text_bytes);
  CipherContext ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_, nonce) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, Bytes(purpose), static_cast<int>(purpose.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), out, &len, nonce + kNonceBytes, static_cast<int>(text_bytes)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), out + len, &len) != 1) {
    return std::nullopt;
  }
  return plain;
}

}  // namespace gantry
