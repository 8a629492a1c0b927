//! SASL client mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as
//! Kafka runs them inside SaslAuthenticate requests (KIP-152). Pure: no I/O; the connection
//! ([`super::conn`]) carries the messages.
//!
//! SCRAM never sends the password: the client proves it knows `SaltedPassword` for the salt and
//! iteration count the server sent, and checks the server's signature in turn, so a broker that
//! does not know the password cannot pass as one that does.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ring::{digest, hmac, pbkdf2};

/// Kafka's minimum SCRAM iteration count (`ScramMechanism.minIterations`): a server asking for
/// fewer is refused, as Kafka's Java client does.
pub const MIN_ITERATIONS: u32 = 4096;

/// The PLAIN message: `authzid NUL authcid NUL passwd` with an empty authzid.
pub fn plain_message(username: &str, password: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(username.len() + password.len() + 2);
    m.push(0);
    m.extend_from_slice(username.as_bytes());
    m.push(0);
    m.extend_from_slice(password.as_bytes());
    m
}

/// The hash a SCRAM mechanism runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramHash {
    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramHash::Sha256 => hmac::HMAC_SHA256,
            ScramHash::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramHash::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramHash::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramHash::Sha256 => &digest::SHA256,
            ScramHash::Sha512 => &digest::SHA512,
        }
    }

    fn len(self) -> usize {
        self.digest().output_len()
    }
}

/// One SCRAM exchange, client side: [`ScramClient::client_first`], then
/// [`ScramClient::client_final`] with the server's first message, then
/// [`ScramClient::verify_server_final`] with its last.
pub struct ScramClient {
    hash: ScramHash,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// The server signature expected in server-final (set by `client_final`).
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    /// A new exchange with a random 24-byte nonce.
    pub fn new(hash: ScramHash, username: &str, password: &str) -> Result<ScramClient, String> {
        let mut raw = [0u8; 24];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw)
            .map_err(|_| "no randomness for the SCRAM nonce".to_string())?;
        Ok(ScramClient::with_nonce(hash, username, password, &B64.encode(raw)))
    }

    /// A new exchange with a given nonce (printable, without `,`): for test vectors.
    pub fn with_nonce(hash: ScramHash, username: &str, password: &str, nonce: &str) -> ScramClient {
        let name = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            hash,
            password: password.to_string(),
            nonce: nonce.to_string(),
            client_first_bare: format!("n={name},r={nonce}"),
            expected_server_signature: None,
        }
    }

    /// client-first-message: no channel binding, no authzid.
    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// client-final-message for the server's first message; remembers the server signature
    /// to expect.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let server_first = std::str::from_utf8(server_first)
            .map_err(|_| "server-first-message is not UTF-8".to_string())?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in server_first.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                Some(("m", _)) => {
                    return Err("server requires an unsupported SCRAM extension".into());
                }
                Some(("e", v)) => return Err(format!("server error: {v}")),
                _ => {}
            }
        }
        let nonce = nonce.ok_or("server-first-message without a nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("server nonce does not extend the client nonce".into());
        }
        let salt = B64
            .decode(salt.ok_or("server-first-message without a salt")?)
            .map_err(|_| "server salt is not base64".to_string())?;
        let iterations: u32 = iterations
            .ok_or("server-first-message without an iteration count")?
            .parse()
            .map_err(|_| "server iteration count is not a number".to_string())?;
        if iterations < MIN_ITERATIONS {
            return Err(format!(
                "server asks for {iterations} iterations, fewer than {MIN_ITERATIONS}"
            ));
        }
        let iterations = std::num::NonZeroU32::new(iterations).ok_or("zero iterations")?;

        let mut salted = vec![0u8; self.hash.len()];
        pbkdf2::derive(
            self.hash.pbkdf2(),
            iterations,
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let salted_key = hmac::Key::new(self.hash.hmac(), &salted);
        let client_key = hmac::sign(&salted_key, b"Client Key");
        let stored_key = digest::digest(self.hash.digest(), client_key.as_ref());
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = hmac::sign(
            &hmac::Key::new(self.hash.hmac(), stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> =
            client_key.as_ref().iter().zip(client_signature.as_ref()).map(|(k, s)| k ^ s).collect();
        let server_key = hmac::sign(&salted_key, b"Server Key");
        let server_signature = hmac::sign(
            &hmac::Key::new(self.hash.hmac(), server_key.as_ref()),
            auth_message.as_bytes(),
        );
        self.expected_server_signature = Some(server_signature.as_ref().to_vec());
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks server-final-message: the server's signature must be the one only a server that
    /// knows the password's stored keys can compute.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final)
            .map_err(|_| "server-final-message is not UTF-8".to_string())?;
        let expected = self.expected_server_signature.as_ref().ok_or("no client-final sent")?;
        for attr in text.split(',') {
            match attr.split_once('=') {
                Some(("e", v)) => return Err(format!("server error: {v}")),
                Some(("v", v)) => {
                    let got =
                        B64.decode(v).map_err(|_| "server signature is not base64".to_string())?;
                    return if &got == expected {
                        Ok(())
                    } else {
                        Err("server signature does not match: the broker does not know this password".into())
                    };
                }
                _ => {}
            }
        }
        Err("server-final-message without a signature".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_is_nul_separated() {
        assert_eq!(plain_message("alice", "s3cr=t"), b"\0alice\0s3cr=t");
    }

    /// RFC 7677, section 3: the SCRAM-SHA-256 example exchange, byte for byte.
    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let mut c =
            ScramClient::with_nonce(ScramHash::Sha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let final_msg = c.client_final(server_first).unwrap();
        assert_eq!(
            std::str::from_utf8(&final_msg).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap();
        let err =
            c.verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap_err();
        assert!(err.contains("does not match"), "{err}");
        assert!(c.verify_server_final(b"e=invalid-proof").unwrap_err().contains("invalid-proof"));
    }

    /// SCRAM-SHA-512 has no RFC example: check the proof against a server computed here from
    /// the definitions in RFC 5802 section 3 (StoredKey = H(ClientKey); the server recovers
    /// ClientKey = proof XOR HMAC(StoredKey, AuthMessage) and checks H(ClientKey) = StoredKey).
    #[test]
    fn scram_sha_512_proof_verifies_on_a_server() {
        let mut c = ScramClient::with_nonce(ScramHash::Sha512, "u,=x", "pw", "abc");
        assert_eq!(c.client_first(), b"n,,n=u=2C=3Dx,r=abc");
        let salt = b"salty";
        let server_first = format!("r=abcdef,s={},i=4096", B64.encode(salt));
        let final_msg =
            String::from_utf8(c.client_final(server_first.as_bytes()).unwrap()).unwrap();
        let (without_proof, proof) = final_msg.rsplit_once(",p=").unwrap();
        let proof = B64.decode(proof).unwrap();

        let mut salted = [0u8; 64];
        let n = std::num::NonZeroU32::new(4096).unwrap();
        pbkdf2::derive(pbkdf2::PBKDF2_HMAC_SHA512, n, salt, b"pw", &mut salted);
        let salted_key = hmac::Key::new(hmac::HMAC_SHA512, &salted);
        let client_key = hmac::sign(&salted_key, b"Client Key");
        let stored = digest::digest(&digest::SHA512, client_key.as_ref());
        let auth = format!("n=u=2C=3Dx,r=abc,{server_first},{without_proof}");
        let sig = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA512, stored.as_ref()), auth.as_bytes());
        let recovered: Vec<u8> = proof.iter().zip(sig.as_ref()).map(|(p, s)| p ^ s).collect();
        assert_eq!(digest::digest(&digest::SHA512, &recovered).as_ref(), stored.as_ref());

        let server_key = hmac::sign(&salted_key, b"Server Key");
        let server_sig =
            hmac::sign(&hmac::Key::new(hmac::HMAC_SHA512, server_key.as_ref()), auth.as_bytes());
        c.verify_server_final(format!("v={}", B64.encode(server_sig)).as_bytes()).unwrap();
    }

    #[test]
    fn scram_refuses_weak_or_foreign_server_messages() {
        let mut c = ScramClient::with_nonce(ScramHash::Sha256, "u", "p", "abc");
        assert!(c.client_final(b"r=abcd,s=c2FsdA==,i=1000").unwrap_err().contains("iterations"));
        assert!(c.client_final(b"r=xyz,s=c2FsdA==,i=4096").unwrap_err().contains("nonce"));
        assert!(c.client_final(b"r=abc,s=c2FsdA==,i=4096").unwrap_err().contains("nonce"));
        assert!(c.client_final(b"m=ext,r=abcd,s=c2FsdA==,i=4096").is_err());
        assert!(c.client_final(b"e=unknown-user").unwrap_err().contains("unknown-user"));
        let random = ScramClient::new(ScramHash::Sha256, "u", "p").unwrap();
        assert_ne!(random.nonce, ScramClient::new(ScramHash::Sha256, "u", "p").unwrap().nonce);
        assert!(!random.nonce.contains(','));
    }
}
